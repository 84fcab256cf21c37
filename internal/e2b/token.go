package e2b

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
// keeps is only where to look.
//
// It learns a token when the surface hands it out (create, connect, get:
// the only ways an E2B SDK gets one) and from scans of the live
// sandboxes, for tokens handed out before the daemon started or by
// another replica. A scan costs one list of the live sandboxes (the store
// keeps no index by token), so a token it does not know never starts one
// of its own: it waits for the next scan, which starts at most once per
// rescanEvery and answers every request waiting for it. Requests with
// unknown tokens, however many, cost at most one scan per rescanEvery,
// and each still gets a right answer: a scan that started after it came.
type tokenIndex struct {
	ids  memo // token -> sandbox id
	mu   sync.Mutex
	scan *tokenScan // the scan under way or waited for, if any
	last time.Time  // when the last scan started
	// every is the least time between two scans' starts; 0: rescanEvery.
	every time.Duration
	// scans counts the scans started (tests).
	scans atomic.Int64
}

// rescanEvery is the least time between two scans of the live sandboxes
// for tokens (tokenIndex).
const rescanEvery = 250 * time.Millisecond

// scanTimeout bounds one scan.
const scanTimeout = 30 * time.Second

// tokenScan is one scan of the live sandboxes' tokens; done is closed when
// found or err is set.
type tokenScan struct {
	start time.Time
	done  chan struct{}
	found map[string]string
	err   error
}

// remember records that token is sandbox id's.
func (x *tokenIndex) remember(token, id string) {
	if token != "" {
		x.ids.remember(token, id)
	}
}

// forget drops token, whose sandbox did not take it.
func (x *tokenIndex) forget(token string) { x.ids.forget(token) }

// lookup returns the id of the live sandbox whose access token is token,
// or "" when none has it: the known one, else what a scan that starts
// after the call finds.
func (x *tokenIndex) lookup(ctx context.Context, sbs Sandboxes, token string) (string, error) {
	came := time.Now()
	if id, ok := x.ids.get(token); ok {
		return id, nil
	}
	x.mu.Lock()
	for {
		s := x.scan
		if s == nil || (s.start.Before(came) && isDone(s)) {
			s = x.startScan(sbs)
		}
		x.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if s.err != nil {
			return "", s.err
		}
		x.mu.Lock()
		if !s.start.Before(came) {
			// A scan that started after the call has answered (the
			// token may also have been handed out meanwhile).
			id, ok := x.ids.get(token)
			if !ok {
				id = s.found[token]
			}
			x.mu.Unlock()
			return id, nil
		}
		// The scan started before the call: wait for the next one,
		// unless the token has been handed out meanwhile.
		if id, ok := x.ids.get(token); ok {
			x.mu.Unlock()
			return id, nil
		}
	}
}

func isDone(s *tokenScan) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// startScan starts a scan, no sooner than every after the last one
// started, and returns it; x.mu is held.
func (x *tokenIndex) startScan(sbs Sandboxes) *tokenScan {
	every := x.every
	if every == 0 {
		every = rescanEvery
	}
	start := time.Now()
	if next := x.last.Add(every); start.Before(next) {
		start = next
	}
	s := &tokenScan{start: start, done: make(chan struct{})}
	x.scan, x.last = s, start
	go func() {
		time.Sleep(time.Until(start))
		x.scans.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
		defer cancel()
		s.found, s.err = scanTokens(ctx, sbs)
		for token, id := range s.found {
			x.ids.remember(token, id)
		}
		close(s.done)
	}()
	return s
}

// scanTokens returns the tokens of the live sandboxes, by token.
func scanTokens(ctx context.Context, sbs Sandboxes) (map[string]string, error) {
	found := map[string]string{}
	opts := service.ListOptions{Statuses: []api.SandboxStatus{api.StatusPending, api.StatusRunning, api.StatusPaused}}
	for {
		page, err := sbs.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list the sandboxes for their access tokens: %w", err)
		}
		for _, sb := range page.Items {
			if sb.AccessToken != "" {
				found[sb.AccessToken] = sb.ID
			}
		}
		if page.NextCursor == "" {
			return found, nil
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
	case p == "/health", p == "/files", isRPCPath(p):
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
	h.serveSandbox(w, r, false)
}
