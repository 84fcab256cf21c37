package e2b

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/service"
)

// maxRemembered bounds what a memo holds; past it, it starts again empty
// (a forgotten entry costs one lookup).
const maxRemembered = 4096

// memo remembers string values by key, at most maxRemembered of them.
type memo struct {
	mu sync.Mutex
	m  map[string]string
}

func (x *memo) get(key string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	v, ok := x.m[key]
	return v, ok
}

func (x *memo) remember(key, v string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil || len(x.m) >= maxRemembered {
		x.m = map[string]string{}
	}
	x.m[key] = v
}

func (x *memo) forget(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, key)
}

// tokenIndex finds the sandbox an access token belongs to, for SDK
// versions that name no sandbox in their envd and code-interpreter calls
// (no E2b-Sandbox-Id, no sandbox host), only its token. A token is
// checked against its sandbox's on every request (Authorize), so what it
// remembers is only where to look.
type tokenIndex struct{ memo }

// lookup returns the id of the live sandbox whose access token is token,
// or "" when none has it: the remembered one, else a scan of the live
// sandboxes (one list of them: the store keeps no index by token).
func (x *tokenIndex) lookup(ctx context.Context, sbs Sandboxes, token string) (string, error) {
	if id, ok := x.get(token); ok {
		return id, nil
	}
	opts := service.ListOptions{Statuses: []api.SandboxStatus{api.StatusPending, api.StatusRunning, api.StatusPaused}}
	for {
		page, err := sbs.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, sb := range page.Items {
			if sb.AccessToken != "" && subtle.ConstantTimeCompare([]byte(sb.AccessToken), []byte(token)) == 1 {
				x.remember(token, sb.ID)
				return sb.ID, nil
			}
		}
		if page.NextCursor == "" {
			return "", nil
		}
		opts.Cursor = page.NextCursor
	}
}

// requestToken returns r's sandbox access token: X-Access-Token, else
// E2B-Traffic-Access-Token (the code interpreter's SDK sends only that
// on its context calls).
func requestToken(r *http.Request) string {
	if t := r.Header.Get(HeaderAccessToken); t != "" {
		return t
	}
	return r.Header.Get(HeaderTrafficToken)
}

// tokenOnlyPort returns the in-sandbox port a request that names no
// sandbox but carries an access token is for: envd's paths 49983, the
// code interpreter's 49999; false for any other request, which is not
// E2B's (agent2env's own port gateway takes X-Access-Token too, on its
// own paths).
func tokenOnlyPort(r *http.Request) (int, bool) {
	if requestToken(r) == "" {
		return 0, false
	}
	p := r.URL.Path
	switch {
	case p == "/execute", p == "/contexts", strings.HasPrefix(p, "/contexts/"):
		return InterpreterPort, true
	case p == "/health", p == "/files", strings.HasPrefix(p, "/process.Process/"), strings.HasPrefix(p, "/filesystem.Filesystem/"):
		return EnvdPort, true
	}
	return 0, false
}

// serveByToken serves a request that names its sandbox only by its access
// token (tokenOnlyPort): an unknown token is a sandbox not found (502),
// as for an ended sandbox, whose token is unknown once it is gone.
func (h *Handler) serveByToken(w http.ResponseWriter, r *http.Request, port int) {
	token := requestToken(r)
	id, err := h.tokens.lookup(r.Context(), h.cfg.Sandboxes, token)
	if err != nil {
		writeError(w, err)
		return
	}
	if id == "" {
		writeSandboxGone(w, "")
		return
	}
	r = r.Clone(r.Context())
	r.Header.Set(HeaderSandboxID, id)
	r.Header.Set(HeaderSandboxPort, strconv.Itoa(port))
	h.serveSandbox(w, r)
}
