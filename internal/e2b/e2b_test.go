package e2b

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

var now = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

const (
	goodKey = "e2b_good-key-0123456789abcdef"
	token   = "tok-123"
)

// fakeSandboxes is the sandbox service in memory; its list pages hold at
// most two sandboxes. A new sandbox runs at once, unless failWith gives
// the reason its image could not be had, or slow keeps it pending.
type fakeSandboxes struct {
	mu       sync.Mutex
	byID     map[string]*api.Sandbox
	order    []string
	created  []api.CreateSandboxRequest
	deleted  []string
	renewed  map[string]time.Time
	failWith string
	slow     bool
	n        int
	cpuTime  time.Duration
	// reads counts Get and Authorize, each a read of the store in
	// service.Sandboxes.
	reads int
	// beforeResume, when set, runs as Resume is called, before it looks
	// at the sandbox (another request's work meanwhile).
	beforeResume func(id string)
	// snaps are the snapshots, oldest first (fakeSnapshots); snapErr,
	// when set, is every Snapshot's error (a runtime without them).
	snaps   []api.Snapshot
	snapErr error
}

func newFakeSandboxes(sbs ...api.Sandbox) *fakeSandboxes {
	f := &fakeSandboxes{byID: map[string]*api.Sandbox{}, renewed: map[string]time.Time{}}
	for _, sb := range sbs {
		f.byID[sb.ID] = &sb
		f.order = append(f.order, sb.ID)
	}
	return f
}

func running(id string, md map[string]string) api.Sandbox {
	return api.Sandbox{ID: id, Image: "agent2env/code-interpreter:latest", CPU: "500m", Memory: "1Gi", Status: api.StatusRunning,
		CreatedAt: now, ExpiresAt: now.Add(5 * time.Minute), AccessToken: token, Metadata: md}
}

func (f *fakeSandboxes) CreateAndWait(_ context.Context, req api.CreateSandboxRequest, _ time.Duration) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, req)
	switch {
	case req.Template == "no-such-template":
		return nil, errdefs.NotFound("template %q not found", req.Template)
	case f.failWith != "":
		return nil, fmt.Errorf("%w: %w", service.ErrImageUnavailable, errdefs.Invalid("%s", f.failWith))
	case req.FromSnapshot != "":
		i := slices.IndexFunc(f.snaps, func(s api.Snapshot) bool { return s.ID == req.FromSnapshot })
		if i < 0 {
			return nil, errdefs.NotFound("snapshot %s not found", req.FromSnapshot)
		}
		req.Image = f.snaps[i].Image
	}
	f.n++
	status := api.StatusRunning
	if f.slow {
		status = api.StatusPending
	}
	sb := api.Sandbox{ID: fmt.Sprintf("new%d", f.n), Image: req.Image, Template: req.Template, Status: status,
		CreatedAt: now, ExpiresAt: api.Never, AccessToken: token, Metadata: maps.Clone(req.Metadata)}
	f.byID[sb.ID] = &sb
	f.order = append(f.order, sb.ID)
	out := sb
	return &out, nil
}

func (f *fakeSandboxes) Get(_ context.Context, id string) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	sb, ok := f.byID[id]
	if !ok {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	}
	out := *sb
	return &out, nil
}

func (f *fakeSandboxes) List(_ context.Context, opts service.ListOptions) (*api.SandboxList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sel []string
	for _, id := range f.order {
		sb := f.byID[id]
		if len(opts.Statuses) > 0 && !slices.Contains(opts.Statuses, sb.Status) {
			continue
		}
		match := true
		for k, v := range opts.Metadata {
			if sb.Metadata[k] != v {
				match = false
			}
		}
		if match {
			sel = append(sel, id)
		}
	}
	if opts.Order != api.OrderDesc && opts.Order != api.OrderAsc && opts.Order != "" {
		return nil, errdefs.Invalid("order %q: want asc or desc", opts.Order)
	}
	if opts.Order == api.OrderDesc {
		slices.Reverse(sel)
	}
	start := 0
	if opts.Cursor != "" {
		start = slices.Index(sel, opts.Cursor)
		if start < 0 {
			return nil, errdefs.Invalid("bad cursor")
		}
	}
	size := 2
	if opts.Limit != nil {
		size = min(size, *opts.Limit)
	}
	out := &api.SandboxList{}
	for i := start; i < len(sel) && i < start+size; i++ {
		out.Items = append(out.Items, *f.byID[sel[i]])
	}
	if start+size < len(sel) {
		out.NextCursor = sel[start+size]
	}
	return out, nil
}

func (f *fakeSandboxes) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byID[id]; !ok {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	delete(f.byID, id)
	f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == id })
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeSandboxes) Renew(_ context.Context, id string, at time.Time) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	if !ok {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if at.Sub(sb.CreatedAt) > math.MaxInt32*time.Second { // as the manager's SetExpiry
		return nil, errdefs.Invalid("expiry %s is too far away", at)
	}
	f.renewed[id] = at
	sb.ExpiresAt = at
	out := *sb
	return &out, nil
}

// Usage measures a running sandbox: 1 GiB of memory limit, 100 MiB used,
// and 50 ms more CPU time at each call.
func (f *fakeSandboxes) Usage(_ context.Context, id string) (service.SandboxUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	switch {
	case !ok:
		return service.SandboxUsage{}, errdefs.NotFound("sandbox %s not found", id)
	case sb.Status != api.StatusRunning:
		return service.SandboxUsage{}, errdefs.Precondition("sandbox %s is %s, not running", id, sb.Status)
	}
	f.cpuTime += 50 * time.Millisecond
	return service.SandboxUsage{MilliCPU: 500, MemoryLimit: 1 << 30, CPUTime: f.cpuTime, MemoryBytes: 100 << 20, At: time.Now()}, nil
}

// Pause and Resume move a sandbox between running and paused; from any
// other status they are 409.
func (f *fakeSandboxes) Pause(_ context.Context, id string) (*api.Sandbox, error) {
	return f.move(id, api.StatusRunning, api.StatusPaused)
}

func (f *fakeSandboxes) Resume(_ context.Context, id string) (*api.Sandbox, error) {
	if f.beforeResume != nil {
		f.beforeResume(id)
	}
	return f.move(id, api.StatusPaused, api.StatusRunning)
}

func (f *fakeSandboxes) move(id string, from, to api.SandboxStatus) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	switch {
	case !ok:
		return nil, errdefs.NotFound("sandbox %s not found", id)
	case sb.Status != from:
		return nil, errdefs.Precondition("sandbox %s is %s", id, sb.Status)
	}
	sb.Status = to
	out := *sb
	return &out, nil
}

func (f *fakeSandboxes) Authorize(_ context.Context, id, tok string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	sb, ok := f.byID[id]
	switch {
	case tok == "":
		return fmt.Errorf("missing access token: %w", errdefs.ErrUnauthenticated)
	case !ok:
		return errdefs.NotFound("sandbox %s not found", id)
	case tok != sb.AccessToken:
		return fmt.Errorf("invalid access token: %w", errdefs.ErrUnauthenticated)
	case sb.Status != api.StatusRunning:
		return errdefs.Precondition("sandbox %s is not running", id)
	}
	return nil
}

// fakeContexts is the context service in memory; StreamChecked's run
// reports stdout "out\n", a display result and the code as the main
// result, or the error of code "1/0", or for code "quiet" only the main
// result.
type fakeContexts struct {
	mu       sync.Mutex
	byID     map[string]api.Context
	n        int
	streams  []string          // sandbox/context of each Stream
	env      map[string]string // the last Stream's
	restarts []string
	creates  int
}

func newFakeContexts() *fakeContexts { return &fakeContexts{byID: map[string]api.Context{}} }

func (f *fakeContexts) Create(_ context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lang := req.Language
	if lang == "" {
		lang = api.LanguagePython
	}
	if lang != api.LanguagePython && lang != api.LanguageJavaScript {
		return nil, errdefs.Invalid("unknown language %q", lang)
	}
	f.n++
	f.creates++
	dir := req.WorkingDir
	if dir == "" {
		dir = "/workspace"
	}
	c := api.Context{ContextID: fmt.Sprintf("ctx%d", f.n), Language: lang, SandboxID: sandboxID, WorkingDir: dir, Name: req.Name}
	f.byID[c.ContextID] = c
	return &c, nil
}

// Default is service.Contexts.Default's rule over the fake's contexts.
func (f *fakeContexts) Default(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error) {
	list, _ := f.List(ctx, sandboxID, "")
	for _, c := range list.Items {
		if c.Name == req.Name && c.Language == req.Language {
			return &c, nil
		}
	}
	return f.Create(ctx, sandboxID, req)
}

func (f *fakeContexts) List(_ context.Context, sandboxID, _ string) (*api.ContextList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &api.ContextList{}
	for _, id := range slices.Sorted(maps.Keys(f.byID)) {
		if c := f.byID[id]; c.SandboxID == sandboxID {
			out.Items = append(out.Items, c)
		}
	}
	return out, nil
}

func (f *fakeContexts) Delete(_ context.Context, sandboxID, id string) (*api.DeleteContextResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.byID[id]; !ok || c.SandboxID != sandboxID {
		return nil, errdefs.WithCode(errdefs.NotFound("context %s not found", id), api.CodeContextNotFound)
	}
	delete(f.byID, id)
	return &api.DeleteContextResponse{ContextID: id}, nil
}

func (f *fakeContexts) Restart(_ context.Context, sandboxID, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.byID[id]; !ok || c.SandboxID != sandboxID {
		return errdefs.WithCode(errdefs.NotFound("context %s not found", id), api.CodeContextNotFound)
	}
	f.restarts = append(f.restarts, id)
	return nil
}

func (f *fakeContexts) StreamChecked(_ context.Context, sandboxID, id string, req api.ExecuteRequest) (func(context.Context, service.Sink) (*api.ExecuteResponse, error), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.byID[id]; !ok || c.SandboxID != sandboxID {
		return nil, errdefs.WithCode(errdefs.NotFound("context %s not found", id), api.CodeContextNotFound)
	}
	if req.Timeout != ExecuteTimeout {
		return nil, fmt.Errorf("timeout %v, want %d", req.Timeout, ExecuteTimeout)
	}
	f.streams = append(f.streams, sandboxID+"/"+id)
	f.env = req.Env
	return func(_ context.Context, sink service.Sink) (*api.ExecuteResponse, error) {
		switch req.Code {
		case "quiet":
			return &api.ExecuteResponse{ExecutionCount: 4, Success: true}, sink.Result(api.ExecutionResult{Text: "1", IsMainResult: true})
		case "1/0":
			_ = sink.Stderr("warn\n")
			return &api.ExecuteResponse{ExecutionCount: 3, Error: &api.ExecutionError{
				Name: "ZeroDivisionError", Value: "division by zero", Traceback: "Traceback…"}}, nil
		}
		if err := sink.Stdout("out\n"); err != nil {
			return nil, err
		}
		if err := sink.Result(api.ExecutionResult{PNG: "iVBORw0K", Text: "<Figure>"}); err != nil {
			return nil, err
		}
		if err := sink.Result(api.ExecutionResult{Text: req.Code, IsMainResult: true}); err != nil {
			return nil, err
		}
		return &api.ExecuteResponse{ExecutionCount: 2, Success: true}, nil
	}, nil
}

// next is agent2env's own routes behind the E2B surface: it answers 299.
var next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(299)
})

// portRequest is a request forwarded to port of sandbox id.
type portRequest struct {
	id   string
	port int
	*http.Request
}

// fakePorts is the port gateway: it records what it is handed in its
// env, answering 298 to a forwarded request and 297 to a preflight.
type fakePorts struct {
	mu sync.Mutex
	e  *env
}

func (p *fakePorts) Forward(w http.ResponseWriter, r *http.Request, id string, port int) {
	p.mu.Lock()
	p.e.port = append(p.e.port, portRequest{id, port, r})
	p.mu.Unlock()
	w.WriteHeader(298)
}

func (p *fakePorts) Preflight(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.e.preflights++
	p.mu.Unlock()
	w.WriteHeader(297)
}

type env struct {
	sb    *fakeSandboxes
	ctx   *fakeContexts
	files *fakeFiles
	procs *fakeProcs
	port  []portRequest // the requests forwarded to the port gateway
	// preflights counts the preflights the port gateway answered.
	preflights int
	h          *Handler
	srv        *httptest.Server
}

// fakeFiles keeps files by sandbox and path (envd_test.go has its
// directory operations).
type fakeFiles struct {
	mu     sync.Mutex
	byPath map[string]string // "id:path" → content
	dirs   map[string]bool   // "id:path" of the directories made
	links  map[string]string // "id:path" → a symbolic link's target
	// watches are those WatchDir made, oldest first.
	watches []*fakeWatch
}

func (f *fakeFiles) Upload(_ context.Context, id, p string, mode fs.FileMode, content io.Reader) (*api.FileInfo, error) {
	b, err := io.ReadAll(content)
	if err != nil {
		return nil, err
	}
	if mode != 0o644 {
		return nil, fmt.Errorf("mode %v", mode)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byPath[id+":"+p] = string(b)
	return &api.FileInfo{Name: path.Base(p), Path: p, Size: int64(len(b))}, nil
}

// UploadFiles keeps the files only when all of them were written, as
// the service's batch does.
func (f *fakeFiles) UploadFiles(ctx context.Context, id string, files func(put service.PutFile) error) ([]api.FileInfo, error) {
	staged := &fakeFiles{byPath: map[string]string{}}
	var out []api.FileInfo
	err := files(func(p string, mode fs.FileMode, content io.Reader) error {
		fi, err := staged.Upload(ctx, id, p, mode, content)
		if err == nil {
			out = append(out, *fi)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.Copy(f.byPath, staged.byPath)
	return out, nil
}

func (f *fakeFiles) Download(_ context.Context, id, p string) (io.ReadCloser, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.byPath[id+":"+p]
	if !ok {
		return nil, 0, errdefs.WithCode(errdefs.NotFound("file %s not found", p), api.CodeFileNotFound)
	}
	return io.NopCloser(strings.NewReader(c)), int64(len(c)), nil
}

func newEnv(t *testing.T, sbs ...api.Sandbox) *env {
	t.Helper()
	keys, err := auth.NewKeys(goodKey)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{sb: newFakeSandboxes(sbs...), ctx: newFakeContexts()}
	ports := &fakePorts{e: e}
	e.files = &fakeFiles{byPath: map[string]string{}, dirs: map[string]bool{}, links: map[string]string{}}
	e.procs = newFakeProcs()
	h, err := New(Config{
		Sandboxes: e.sb, Files: e.files, Procs: e.procs, Contexts: e.ctx, Ports: ports, Snapshots: e.sb,
		Keys: keys, RequireKey: true, Now: func() time.Time { return now }, CreateWait: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(h.Wrap(next))
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request with headers (pairs) and returns the status, the
// headers and the body.
func (e *env) do(t *testing.T, method, path, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// api sends a control-plane request with the good key.
func (e *env) api(t *testing.T, method, path, body string) (int, http.Header, string) {
	t.Helper()
	return e.do(t, method, path, body, HeaderAPIKey, goodKey)
}

// in sends a request to port of sandbox id with the access token.
func (e *env) in(t *testing.T, id string, port int, method, path, body string) (int, string) {
	t.Helper()
	code, _, b := e.do(t, method, path, body, HeaderSandboxID, id, HeaderSandboxPort, fmt.Sprint(port), HeaderAccessToken, token)
	return code, b
}

// routeCase is a request and what it must answer.
type routeCase struct {
	name    string
	method  string
	path    string
	headers []string
	status  int
	body    string // a part of the body
}

// checkRoutes sends each case's request (with "{}" when it is JSON) and
// checks its answer.
func (e *env) checkRoutes(t *testing.T, cases []routeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reqBody string
			if slices.Contains(tc.headers, "application/json") {
				reqBody = "{}"
			}
			code, _, body := e.do(t, tc.method, tc.path, reqBody, tc.headers...)
			if code != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, code, body, tc.status, tc.body)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	e := newEnv(t, running("sba", nil), api.Sandbox{ID: "sbdone", Status: api.StatusSucceeded, AccessToken: token})
	e.checkRoutes(t, []routeCase{
		{"own route", "GET", "/health", nil, 299, ""},
		{"own api", "GET", "/api/v1/sandboxes", nil, 299, ""},
		{"own look-alike", "GET", "/sandboxesx", nil, 299, ""},
		{"control plane without key", "GET", "/v2/sandboxes", nil, 401, `"code":401`},
		{"control plane, bad key", "GET", "/sandboxes", []string{HeaderAPIKey, "nope"}, 401, `"code":401`},
		{"control plane", "GET", "/v2/sandboxes", []string{HeaderAPIKey, goodKey}, 200, `"sandboxID":"sba"`},
		{"control plane, unknown route", "GET", "/v2/sandboxes/sba/nope/x", []string{HeaderAPIKey, goodKey}, 404, `"code":404`},
		// E2B's other APIs, which the SDKs call: 501 in E2B's form,
		// the key checked first, never agent2env's own 401 or 404.
		{"snapshots API", "GET", "/snapshots", []string{HeaderAPIKey, goodKey}, 200, `[]`},
		{"snapshots API without key", "GET", "/snapshots?limit=1", nil, 401, `"code":401`},
		{"snapshot's template without key", "DELETE", "/templates/snap-abcdefgh2345", nil, 401, `"code":401`},
		{"templates API", "POST", "/v3/templates", []string{HeaderAPIKey, goodKey}, 501, `"code":501`},
		{"template API", "GET", "/templates/aliases/x", []string{HeaderAPIKey, goodKey}, 501, "template builds"},
		{"v2 template API", "POST", "/v2/templates/t/builds/b", []string{HeaderAPIKey, goodKey}, 501, "template builds"},
		{"volumes API", "DELETE", "/volumes/v", []string{HeaderAPIKey, goodKey}, 501, "volumes"},
		{"volume content API", "GET", "/volumecontent/v/file", []string{HeaderAPIKey, goodKey}, 501, "volumes"},
		{"secrets API", "GET", "/secrets", []string{HeaderAPIKey, goodKey}, 501, "secrets"},
		{"default templates API", "GET", "/default-templates", []string{HeaderAPIKey, goodKey}, 501, "default templates"},
		{"own look-alike of another API", "GET", "/secretsx", nil, 299, ""},
		{"v2 without an API", "GET", "/v2/nope", nil, 299, ""},
		{"envd health", "GET", "/health", []string{HeaderSandboxID, "sba", HeaderSandboxPort, "49983", HeaderAccessToken, token}, 204, ""},
		{"envd is the default port", "GET", "/health", []string{HeaderSandboxID, "sba", HeaderAccessToken, token}, 204, ""},
		{"headers win over own routes", "GET", "/api/v1/sandboxes", []string{HeaderSandboxID, "sba", HeaderAccessToken, token}, 404, "no such route"},
		{"interpreter health", "GET", "/health", []string{HeaderSandboxID, "sba", HeaderSandboxPort, "49999", HeaderAccessToken, token}, 200, "OK"},
		{"traffic token", "GET", "/contexts", []string{HeaderSandboxID, "sba", HeaderSandboxPort, "49999", HeaderTrafficToken, token}, 200, "[]"},
		{"unknown sandbox", "GET", "/health", []string{HeaderSandboxID, "nosuch", HeaderAccessToken, token}, 502, sandboxNotFoundText},
		{"ended sandbox", "GET", "/health", []string{HeaderSandboxID, "sbdone", HeaderAccessToken, token}, 502, sandboxNotFoundText},
		{"no token", "GET", "/health", []string{HeaderSandboxID, "sba"}, 401, `"code":401`},
		{"wrong token", "GET", "/health", []string{HeaderSandboxID, "sba", HeaderAccessToken, "x"}, 401, "invalid access token"},
		{"port without id", "GET", "/health", []string{HeaderSandboxPort, "49983"}, 400, HeaderSandboxID},
		{"bad port", "GET", "/health", []string{HeaderSandboxID, "sba", HeaderSandboxPort, "0"}, 400, "port"},
		{"process API", "POST", "/process.Process/List", []string{HeaderSandboxID, "sba", HeaderAccessToken, token, "Content-Type", "application/json"}, 200, `{}`},
		{"process API, binary", "POST", "/process.Process/List", []string{HeaderSandboxID, "sba", HeaderAccessToken, token, "Content-Type", "application/proto"}, 200, ``},
		{"unknown envd service", "POST", "/process.Nope/List", []string{HeaderSandboxID, "sba", HeaderAccessToken, token}, 404, "no such route"},
		{"user port", "GET", "/app/x", []string{HeaderSandboxID, "sba", HeaderSandboxPort, "8080", HeaderAccessToken, token}, 298, ""},
		{"signed file URL", "GET", "/files?path=a.txt&username=user&signature=v1_abc&signature_expiration=1", nil, 400, "signed file URLs are not supported"},
	})
	// The user port's request reached the gateway, with its path and
	// without E2B's headers or the token.
	if len(e.port) != 1 {
		t.Fatalf("port requests: %d, want 1", len(e.port))
	}
	r := e.port[0]
	if r.id != "sba" || r.port != 8080 || r.URL.Path != "/app/x" || r.Header.Get(HeaderAccessToken) != "" ||
		r.Header.Get(HeaderSandboxID) != "" || r.Header.Get(HeaderSandboxPort) != "" {
		t.Errorf("port request: %s %d %s %v", r.id, r.port, r.URL.Path, r.Header)
	}
}

func TestCreate(t *testing.T) {
	ttl := func(n int) *int { return &n }
	// pub is the metadata of a sandbox whose ports are public, as E2B's
	// are unless a create says otherwise.
	pub := func(kv ...string) map[string]string {
		md := map[string]string{MetadataPublicTraffic: "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			md[kv[i]] = kv[i+1]
		}
		return md
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
		want   api.CreateSandboxRequest // the service's request, when 201
		errHas string
	}{
		{"code interpreter", `{"templateID":"code-interpreter-v1","timeout":300,"metadata":{"a":"b"},"envVars":{"K":"V"},"autoPause":false}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/code-interpreter", TTL: ttl(300), Env: map[string]string{"K": "V"}, Metadata: pub("a", "b")}, ""},
		{"base, default timeout", `{"templateID":"base","metadata":{},"envVars":{}}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/python", TTL: ttl(DefaultTimeout), Env: map[string]string{}, Metadata: pub()}, ""},
		{"template", `{"templateID":"mytpl","timeout":60}`, 201,
			api.CreateSandboxRequest{Template: "mytpl", Overrides: &api.SandboxOverrides{TTL: ttl(60)}, Metadata: pub()}, ""},
		{"image", `{"templateID":"python:3.12","allow_internet_access":false,"network":null,"volumeMounts":[]}`, 201,
			api.CreateSandboxRequest{Image: "python:3.12", TTL: ttl(DefaultTimeout), Metadata: pub()}, ""},
		{"private ports", `{"templateID":"base","metadata":{"a":"b"},"network":{"allowPublicTraffic":false}}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/python", TTL: ttl(DefaultTimeout), Metadata: map[string]string{"a": "b"}}, ""},
		{"private ports, no metadata", `{"templateID":"base","network":{"allowPublicTraffic":false,"allowOut":[],"maskRequestHost":null}}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/python", TTL: ttl(DefaultTimeout)}, ""},
		{"public ports asked", `{"templateID":"base","network":{"allowPublicTraffic":true}}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/python", TTL: ttl(DefaultTimeout), Metadata: pub()}, ""},
		{"public ports by default", `{"templateID":"base","network":{"allowPublicTraffic":null}}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/python", TTL: ttl(DefaultTimeout), Metadata: pub()}, ""},
		{"the mark in metadata", `{"templateID":"base","metadata":{"agent2env/e2b-public-traffic":"true"},"network":{"allowPublicTraffic":false}}`, 400,
			api.CreateSandboxRequest{}, "agent2env/e2b-public-traffic"},
		{"public traffic a word", `{"templateID":"base","network":{"allowPublicTraffic":"no"}}`, 400, api.CreateSandboxRequest{}, "(got string)"},
		{"network a number", `{"templateID":"base","network":5}`, 400, api.CreateSandboxRequest{}, "network must be a JSON object"},
		{"host mask", `{"templateID":"base","network":{"allowPublicTraffic":false,"maskRequestHost":"${PORT}-x.example.com"}}`, 400,
			api.CreateSandboxRequest{}, "network.maskRequestHost: "},
		{"network field unknown", `{"templateID":"base","network":{"ingress":true}}`, 400, api.CreateSandboxRequest{}, "network.ingress: unknown field"},
		{"no template", `{"timeout":60}`, 400, api.CreateSandboxRequest{}, "templateID is required"},
		{"auto pause", `{"templateID":"base","autoPause":true}`, 400, api.CreateSandboxRequest{}, "autoPause"},
		{"auto resume", `{"templateID":"base","autoResume":{"enabled":true}}`, 400, api.CreateSandboxRequest{}, "autoResume"},
		{"auto resume off (older SDKs)", `{"templateID":"base","autoResume":{"enabled":false}}`, 201,
			api.CreateSandboxRequest{Image: "agent2env/python", TTL: ttl(DefaultTimeout), Metadata: pub()}, ""},
		{"internet", `{"templateID":"base","allow_internet_access":true}`, 400, api.CreateSandboxRequest{}, "allow_internet_access"},
		{"internet of a template", `{"templateID":"mytpl","allow_internet_access":false}`, 400, api.CreateSandboxRequest{}, "allow_internet_access"},
		{"network", `{"templateID":"base","network":{"allowOut":["x"]}}`, 400, api.CreateSandboxRequest{}, "network.allowOut: egress"},
		{"volumes", `{"templateID":"base","volumeMounts":[{"name":"v","path":"/v"}]}`, 400, api.CreateSandboxRequest{}, "volumeMounts"},
		{"unknown field", `{"templateID":"base","gpu":1}`, 400, api.CreateSandboxRequest{}, "gpu: unknown field"},
		{"zero timeout", `{"templateID":"base","timeout":0}`, 400, api.CreateSandboxRequest{}, "timeout"},
		{"unknown template", `{"templateID":"no-such-template"}`, 404, api.CreateSandboxRequest{}, "not found"},
		// A snapshot's id as templateID: a sandbox made from it (the
		// fake knows snap-abcdefgh2345), with its timeout and metadata.
		{"snapshot", `{"templateID":"snap-abcdefgh2345","timeout":60,"metadata":{"a":"b"},"envVars":{},"autoPause":false}`, 201,
			api.CreateSandboxRequest{FromSnapshot: "snap-abcdefgh2345", TTL: ttl(60), Metadata: pub("a", "b")}, ""},
		{"snapshot, private ports", `{"templateID":"snap-abcdefgh2345","network":{"allowPublicTraffic":false}}`, 201,
			api.CreateSandboxRequest{FromSnapshot: "snap-abcdefgh2345", TTL: ttl(DefaultTimeout)}, ""},
		{"snapshot with variables", `{"templateID":"snap-abcdefgh2345","envVars":{"K":"V"}}`, 400, api.CreateSandboxRequest{}, "envVars: a sandbox made from a snapshot"},
		{"snapshot with internet", `{"templateID":"snap-abcdefgh2345","allow_internet_access":false}`, 400, api.CreateSandboxRequest{}, "snapshot's network"},
		{"unknown snapshot", `{"templateID":"snap-zzzzzzzzzzzz"}`, 404, api.CreateSandboxRequest{}, "snapshot snap-zzzzzzzzzzzz not found"},
		{"template named like a snapshot", `{"templateID":"snap-mine"}`, 201,
			api.CreateSandboxRequest{Template: "snap-mine", Overrides: &api.SandboxOverrides{TTL: ttl(DefaultTimeout)}, Metadata: pub()}, ""},
		{"not json", `templateID=base`, 400, api.CreateSandboxRequest{}, "JSON"},
		{"not an object", `["base"]`, 400, api.CreateSandboxRequest{}, "the body must be a JSON object (got array)"},
		{"template id a number", `{"templateID":1}`, 400, api.CreateSandboxRequest{}, "templateID must be a string (got number)"},
		{"timeout a word", `{"templateID":"base","timeout":"long"}`, 400, api.CreateSandboxRequest{}, "(got string)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.sb.snaps = []api.Snapshot{{ID: "snap-abcdefgh2345", SandboxID: "old", Image: "agent2env/code-interpreter"}}
			code, _, body := e.api(t, "POST", "/v2/sandboxes", tc.body)
			if code != tc.status {
				t.Fatalf("status %d %s, want %d", code, body, tc.status)
			}
			if tc.status != 201 {
				var eb errorBody
				if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Code != tc.status || !strings.Contains(eb.Message, tc.errHas) {
					t.Errorf("error body %s, want code %d and %q", body, tc.status, tc.errHas)
				}
				if len(e.sb.byID) != 0 {
					t.Errorf("sandboxes left: %v", e.sb.byID)
				}
				return
			}
			got := e.sb.created[0]
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("service request %s, want %s", gotJSON, wantJSON)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"templateID", "sandboxID", "clientID", "envdVersion", "envdAccessToken", "trafficAccessToken"} {
				if s, _ := v[k].(string); s == "" {
					t.Errorf("%s missing in %s", k, body)
				}
			}
			if v["envdVersion"] != EnvdVersion || v["envdAccessToken"] != token {
				t.Errorf("create response %s", body)
			}
		})
	}
}

func TestCreateV1AndFailure(t *testing.T) {
	e := newEnv(t)
	if code, _, body := e.api(t, "POST", "/sandboxes", `{"templateID":"base"}`); code != 201 || !strings.Contains(body, `"templateID":"base"`) {
		t.Errorf("v1 create: %d %s", code, body)
	}
	e.sb.slow = true
	code, _, body := e.api(t, "POST", "/v2/sandboxes", `{"templateID":"base"}`)
	if code != 503 || len(e.sb.deleted) != 1 || e.sb.deleted[0] != "new2" {
		t.Errorf("slow create: %d %s, deleted %v; want 503 and the pending sandbox deleted", code, body, e.sb.deleted)
	}
	e.sb.slow, e.sb.failWith = false, "prepare image agent2env/nope: not found"
	code, _, body = e.api(t, "POST", "/v2/sandboxes", `{"templateID":"agent2env/nope"}`)
	if code != 400 || !strings.Contains(body, "templateID: ") || !strings.Contains(body, "prepare image agent2env/nope") {
		t.Errorf("failed image: %d %s, want 400 naming templateID", code, body)
	}
}

func TestSandboxOps(t *testing.T) {
	e := newEnv(t, running("sba", map[string]string{"suite": "x"}), running("sbb", map[string]string{"suite": "y"}),
		running("sbc", map[string]string{"suite": "x"}), running("sbd", map[string]string{"suite": "x"}),
		api.Sandbox{ID: "sbdone", Status: api.StatusSucceeded})

	code, _, body := e.api(t, "GET", "/sandboxes/sba", "")
	var d map[string]any
	if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil {
		t.Fatalf("get: %d %s", code, body)
	}
	for k, want := range map[string]any{"templateID": "code-interpreter-v1", "sandboxID": "sba", "clientID": ClientID,
		"startedAt": "2026-12-04T15:00:00Z", "endAt": "2026-12-04T15:05:00Z", "envdVersion": EnvdVersion,
		"cpuCount": 1.0, "memoryMB": 1024.0, "diskSizeMB": 0.0, "state": "running", "envdAccessToken": token} {
		if d[k] != want {
			t.Errorf("get %s = %v, want %v", k, d[k], want)
		}
	}
	if code, _, _ := e.api(t, "GET", "/sandboxes/sbdone", ""); code != 404 {
		t.Errorf("get of an ended sandbox: %d, want 404", code)
	}

	// The v2 list follows X-Next-Token, newest first as E2B's, or oldest
	// first with order=asc.
	for order, want := range map[string]string{"": "[sbd sbc sba]", "&order=desc": "[sbd sbc sba]", "&order=asc": "[sba sbc sbd]"} {
		var ids []string
		tokenQ := ""
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("too many pages")
			}
			code, h, body := e.api(t, "GET", "/v2/sandboxes?metadata=suite%3Dx&limit=2"+order+tokenQ, "")
			var items []listedView
			if err := json.Unmarshal([]byte(body), &items); code != 200 || err != nil {
				t.Fatalf("list: %d %s", code, body)
			}
			for _, it := range items {
				ids = append(ids, it.SandboxID)
			}
			next := h.Get(HeaderNextToken)
			if next == "" {
				break
			}
			tokenQ = "&nextToken=" + next
		}
		if fmt.Sprint(ids) != want {
			t.Errorf("order %q: listed %v, want %s", order, ids, want)
		}
	}
	for q, want := range map[string]string{
		"/v2/sandboxes?state=paused":                     "[]",
		"/v2/sandboxes?state=running&metadata=suite%3Dy": `"sandboxID":"sbb"`,
		"/sandboxes?metadata=suite%3Dy":                  `"sandboxID":"sbb"`,
	} {
		if code, _, body := e.api(t, "GET", q, ""); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s, want %s", q, code, body, want)
		}
	}
	// The v1 list follows the service's cursors itself: every running one,
	// newest first.
	if code, _, body := e.api(t, "GET", "/sandboxes", ""); code != 200 || strings.Count(body, `"sandboxID"`) != 4 || strings.Contains(body, "sbdone") ||
		!(strings.Index(body, `"sbd"`) < strings.Index(body, `"sbc"`) && strings.Index(body, `"sbb"`) < strings.Index(body, `"sba"`)) {
		t.Errorf("v1 list: %d %s, want the 4 running sandboxes, newest first", code, body)
	}
	for q, want := range map[string]int{"/v2/sandboxes?state=dead": 400, "/v2/sandboxes?limit=0": 400, "/v2/sandboxes?order=newest": 400,
		"/v2/sandboxes?metadata=suite": 400, "/v2/sandboxes?metadata=suite%3D%25zz": 400} {
		if code, _, _ := e.api(t, "GET", q, ""); code != want {
			t.Errorf("%s: %d, want %d", q, code, want)
		}
	}

	if code, _, body := e.api(t, "POST", "/sandboxes/sba/timeout", `{"timeout":600}`); code != 204 || !e.sb.renewed["sba"].Equal(now.Add(10*time.Minute)) {
		t.Errorf("timeout: %d %s, renewed at %v", code, body, e.sb.renewed["sba"])
	}
	for _, body := range []string{`{"timeout":0}`, `{"timeout":-1}`, `{"timeout":2147483648}`, `{"timeout":36028797018967568}`} {
		if code, _, b := e.api(t, "POST", "/sandboxes/sba/timeout", body); code != 400 || !strings.Contains(b, "timeout: want a whole number of seconds from 1 to 2147483647") ||
			!e.sb.renewed["sba"].Equal(now.Add(10*time.Minute)) {
			t.Errorf("timeout %s: %d %s, renewed at %v; want 400 and the expiry unchanged", body, code, b, e.sb.renewed["sba"])
		}
	}
	for body, want := range map[string]int{`{"duration":3600}`: 204, `{}`: 400, `{"duration":3601}`: 400, `{"duration":-1}`: 400, `{"duration":0}`: 400} {
		if code, _, b := e.api(t, "POST", "/sandboxes/sbc/refreshes", body); code != want || (want == 400 && !strings.Contains(b, "duration")) {
			t.Errorf("refresh %s: %d %s, want %d naming duration", body, code, b, want)
		}
	}
	if !e.sb.renewed["sbc"].Equal(now.Add(time.Hour)) {
		t.Errorf("refreshed to %v", e.sb.renewed["sbc"])
	}
	// A refresh, as E2B's, never shortens a sandbox's life.
	if code, _, b := e.api(t, "POST", "/sandboxes/sbc/refreshes", `{"duration":120}`); code != 204 || !e.sb.renewed["sbc"].Equal(now.Add(time.Hour)) {
		t.Errorf("a shorter refresh: %d %s, end now %v; want 204 and the end kept", code, b, e.sb.renewed["sbc"])
	}
	if code, _, _ := e.api(t, "POST", "/sandboxes/nosuch/timeout", `{"timeout":600}`); code != 404 {
		t.Errorf("timeout of an unknown sandbox: %d, want 404", code)
	}
	// A connect, as E2B's, only extends a running sandbox's life (the
	// SDKs send their default, 300 s, when the caller gives none): sbb
	// ends in 5 minutes.
	if code, _, body := e.api(t, "POST", "/sandboxes/sbb/connect", `{"timeout":60}`); code != 200 || !strings.Contains(body, `"envdAccessToken":"tok-123"`) ||
		!e.sb.renewed["sbb"].IsZero() {
		t.Errorf("connect with a shorter timeout: %d %s, renewed to %v; want 200 and the end kept", code, body, e.sb.renewed["sbb"])
	}
	if code, _, body := e.api(t, "POST", "/sandboxes/sbb/connect", `{"timeout":600}`); code != 200 || !strings.Contains(body, `"envdAccessToken":"tok-123"`) ||
		!e.sb.renewed["sbb"].Equal(now.Add(10*time.Minute)) {
		t.Errorf("connect with a longer timeout: %d %s, renewed to %v", code, body, e.sb.renewed["sbb"])
	}
	if code, _, _ := e.api(t, "POST", "/v2/sandboxes/sbdone/connect", `{"timeout":60}`); code != 404 {
		t.Errorf("connect to an ended sandbox: %d, want 404", code)
	}
	for op, method := range map[string]string{"resume": "POST", "logs": "GET"} {
		if code, _, body := e.api(t, method, "/sandboxes/sba/"+op, ""); code != 501 || !strings.Contains(body, `"code":501`) {
			t.Errorf("%s: %d %s, want 501", op, code, body)
		}
	}

	// Pause (204; 409 is the SDK's "already paused"), state paused in get
	// and list, resume by connect (201, then 200).
	for _, tc := range []struct{ target, body string }{
		{"/sandboxes/sba/pause", `{"memory":false}`},
		{"/sandboxes/sba/pause", `{"requireHealthyGuest":true}`},
		{"/sandboxes/sba/pause", `{"snapshot":true}`},
	} {
		if code, _, body := e.api(t, "POST", tc.target, tc.body); code != 400 || !strings.Contains(body, `"code":400`) {
			t.Errorf("pause with %s: %d %s, want 400", tc.body, code, body)
		}
	}
	for _, tc := range []struct {
		target, body string
		want         int
	}{
		{"/sandboxes/sba/pause", `{"memory":true,"requireHealthyGuest":false}`, 204},
		{"/sandboxes/sba/pause", "", 409},
		{"/sandboxes/nosuch/pause", "", 404},
		{"/sandboxes/sbc/pause", "", 204},
	} {
		if code, _, body := e.api(t, "POST", tc.target, tc.body); code != tc.want {
			t.Errorf("pause %s %s: %d %s, want %d", tc.target, tc.body, code, body, tc.want)
		}
	}
	if code, _, body := e.api(t, "GET", "/sandboxes/sba", ""); code != 200 || !strings.Contains(body, `"state":"paused"`) {
		t.Errorf("get of a paused sandbox: %d %s", code, body)
	}
	for q, want := range map[string]string{
		"/v2/sandboxes?state=paused&metadata=suite%3Dx":  "[sbc sba]",
		"/v2/sandboxes?state=running&metadata=suite%3Dx": "[sbd]",
		// The fake's pages hold two, newest first.
		"/v2/sandboxes?state=running,paused&metadata=suite%3Dx":           "[sbd sbc]",
		"/v2/sandboxes?metadata=suite%3Dx":                                "[sbd sbc]",
		"/v2/sandboxes?state=running,paused&metadata=suite%3Dx&order=asc": "[sba sbc]",
		"/sandboxes?metadata=suite%3Dx":                                   "[sbd]",
	} {
		code, _, body := e.api(t, "GET", q, "")
		var items []listedView
		if err := json.Unmarshal([]byte(body), &items); code != 200 || err != nil {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		var ids []string
		for _, it := range items {
			ids = append(ids, it.SandboxID)
		}
		if fmt.Sprint(ids) != want {
			t.Errorf("%s listed %v, want %s", q, ids, want)
		}
	}
	if code, _, body := e.api(t, "POST", "/sandboxes/sba/connect", `{"timeout":60,"memory":false}`); code != 400 || !strings.Contains(body, "memory") {
		t.Errorf("connect asking for a cold boot: %d %s, want 400", code, body)
	}
	for _, body := range []string{`{"timeout":-1}`, `{"timeout":0}`} { // refused before the resume
		if code, _, b := e.api(t, "POST", "/sandboxes/sba/connect", body); code != 400 {
			t.Errorf("connect with %s: %d %s, want 400", body, code, b)
		}
		if sb, _ := e.sb.Get(t.Context(), "sba"); sb.Status != api.StatusPaused {
			t.Errorf("a refused connect left sba %s, want paused", sb.Status)
		}
	}
	for _, want := range []int{201, 200} {
		if code, _, body := e.api(t, "POST", "/sandboxes/sba/connect", `{"timeout":60}`); code != want || !strings.Contains(body, `"sandboxID":"sba"`) {
			t.Errorf("connect: %d %s, want %d", code, body, want)
		}
	}
	if sb, _ := e.sb.Get(t.Context(), "sba"); sb.Status != api.StatusRunning {
		t.Errorf("sba is %s after connect, want running", sb.Status)
	}
	if code, _, _ := e.api(t, "PUT", "/sandboxes/sba", ""); code != 405 {
		t.Errorf("PUT: %d, want 405", code)
	}
	if code, _, _ := e.api(t, "DELETE", "/sandboxes/sba", ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if code, _, _ := e.api(t, "DELETE", "/sandboxes/sba", ""); code != 404 {
		t.Errorf("second delete: %d, want 404", code)
	}
}

// lines decodes an NDJSON body.
func lines(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestExecute(t *testing.T) {
	e := newEnv(t, running("sba", nil), running("sbb", nil))
	code, body := e.in(t, "sba", InterpreterPort, "POST", "/execute", `{"code":"x","context_id":null,"language":null,"env_vars":null}`)
	if code != 200 {
		t.Fatalf("execute: %d %s", code, body)
	}
	got := lines(t, body)
	var types []string
	for _, l := range got {
		types = append(types, l["type"].(string))
	}
	if fmt.Sprint(types) != "[stdout result result number_of_executions end_of_execution]" {
		t.Fatalf("lines %v", body)
	}
	if got[0]["text"] != "out\n" || got[0]["timestamp"] == nil || got[1]["png"] != "iVBORw0K" || got[1]["is_main_result"] != false ||
		got[2]["text"] != "x" || got[2]["is_main_result"] != true || got[3]["execution_count"] != 2.0 {
		t.Errorf("lines %s", body)
	}
	// The default context is made once per sandbox and language.
	e.in(t, "sba", InterpreterPort, "POST", "/execute", `{"code":"y"}`)
	e.in(t, "sbb", InterpreterPort, "POST", "/execute", `{"code":"y","language":"python"}`)
	if e.ctx.creates != 2 || fmt.Sprint(e.ctx.streams) != "[sba/ctx1 sba/ctx1 sbb/ctx2]" {
		t.Errorf("creates %d, streams %v", e.ctx.creates, e.ctx.streams)
	}
	// Its kernel starts in the home, as E2B's, where files and commands
	// take relative paths from.
	if dir := e.ctx.byID["ctx1"].WorkingDir; dir != service.HomeDir {
		t.Errorf("the default context's working dir: %q, want %s", dir, service.HomeDir)
	}

	// Output while the code runs is flushed as it comes (chunked); an
	// execution whose only output is its main result answers in one
	// write, with a Content-Length.
	for _, tc := range []struct {
		code  string
		sized bool
	}{{"x", false}, {"quiet", true}} {
		code, hdr, body := e.do(t, "POST", "/execute", `{"code":"`+tc.code+`"}`,
			HeaderSandboxID, "sba", HeaderSandboxPort, fmt.Sprint(InterpreterPort), HeaderAccessToken, token)
		if sized := hdr.Get("Content-Length") != ""; code != 200 || sized != tc.sized {
			t.Errorf("execute %s: %d, Content-Length %q, want one: %v", tc.code, code, hdr.Get("Content-Length"), tc.sized)
		}
		if tc.code == "quiet" && body != `{"type":"result","text":"1","is_main_result":true}
{"type":"number_of_executions","execution_count":4}
{"type":"end_of_execution"}
` {
			t.Errorf("execute quiet: %s", body)
		}
	}

	// An execution's variables go to the execution (the contexts' service checks them).
	if code, body := e.in(t, "sba", InterpreterPort, "POST", "/execute", `{"code":"x","env_vars":{"A":"1"}}`); code != 200 || fmt.Sprint(e.ctx.env) != "map[A:1]" {
		t.Errorf("execute with env_vars: %d %s, env %v", code, body, e.ctx.env)
	}
	code, body = e.in(t, "sba", InterpreterPort, "POST", "/execute", `{"code":"1/0","context_id":"ctx1"}`)
	got = lines(t, body)
	if code != 200 || len(got) != 4 || got[0]["type"] != "stderr" || got[1]["type"] != "error" || got[1]["name"] != "ZeroDivisionError" ||
		got[1]["value"] != "division by zero" || got[1]["traceback"] != "Traceback…" {
		t.Errorf("failing code: %d %s", code, body)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"code":"x","context_id":"ctx1","language":"python"}`, "not both"},
		{`{"code":"x","context_id":"ctx2"}`, "not found"}, // sbb's
		{`{"code":"x","language":"cobol"}`, "language"},
		{`not json`, "not valid JSON"},
	} {
		code, body := e.in(t, "sba", InterpreterPort, "POST", "/execute", tc.body)
		if code < 400 || code >= 500 || !strings.Contains(body, tc.want) {
			t.Errorf("execute %s: %d %s, want a 4xx with %q", tc.body, code, body, tc.want)
		}
	}
}

func TestContexts(t *testing.T) {
	e := newEnv(t, running("sba", nil), running("sbb", nil))
	code, body := e.in(t, "sba", InterpreterPort, "POST", "/contexts", `{"language":"javascript","cwd":"/tmp"}`)
	if code != 200 || body != `{"id":"ctx1","language":"javascript","cwd":"/tmp"}`+"\n" {
		t.Errorf("create: %d %s", code, body)
	}
	// No cwd is the home, as E2B's; a relative one is taken from it.
	if code, body := e.in(t, "sba", InterpreterPort, "POST", "/contexts", `{}`); code != 200 || !strings.Contains(body, `"language":"python"`) ||
		!strings.Contains(body, `"cwd":"`+service.HomeDir+`"`) {
		t.Errorf("create python: %d %s", code, body)
	}
	if code, body := e.in(t, "sba", InterpreterPort, "POST", "/contexts", `{"cwd":"data"}`); code != 200 || !strings.Contains(body, `"cwd":"`+service.HomeDir+`/data"`) {
		t.Errorf("create in a relative cwd: %d %s", code, body)
	}
	e.in(t, "sba", InterpreterPort, "DELETE", "/contexts/ctx3", "")
	if code, body := e.in(t, "sba", InterpreterPort, "GET", "/contexts", ""); code != 200 || strings.Count(body, `"id"`) != 2 {
		t.Errorf("list: %d %s", code, body)
	}
	if code, body := e.in(t, "sbb", InterpreterPort, "GET", "/contexts", ""); code != 200 || body != "[]\n" {
		t.Errorf("list of another sandbox: %d %s", code, body)
	}
	if code, body := e.in(t, "sbb", InterpreterPort, "DELETE", "/contexts/ctx1", ""); code != 404 {
		t.Errorf("delete from another sandbox: %d %s", code, body)
	}
	if code, body := e.in(t, "sba", InterpreterPort, "DELETE", "/contexts/ctx1", ""); code != 200 {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, body := e.in(t, "sba", InterpreterPort, "POST", "/contexts/ctx2/restart", ""); code != 200 || fmt.Sprint(e.ctx.restarts) != "[ctx2]" {
		t.Errorf("restart: %d %s, restarts %v", code, body, e.ctx.restarts)
	}
	if code, body := e.in(t, "sbb", InterpreterPort, "POST", "/contexts/ctx2/restart", ""); code != 404 {
		t.Errorf("restart from another sandbox: %d %s", code, body)
	}
	if code, body := e.in(t, "sba", InterpreterPort, "POST", "/contexts", `{"language":"cobol"}`); code != 400 {
		t.Errorf("bad language: %d %s", code, body)
	}
}

// multipartBody returns a body of files (name → content, in order) and
// its content type.
func multipartBody(t *testing.T, files ...string) (string, string) {
	t.Helper()
	var b strings.Builder
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		w, err := mw.CreateFormFile("file", files[i])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, files[i+1])
	}
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

func TestFiles(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	upload := func(query string, files ...string) (int, string) {
		t.Helper()
		body, ct := multipartBody(t, files...)
		code, _, b := e.do(t, "POST", "/files"+query, body, HeaderSandboxID, "sba", HeaderAccessToken, token, "Content-Type", ct)
		return code, b
	}
	if code, b := upload("?path=%2Ftmp%2Fa%2Fb.txt", "/tmp/a/b.txt", "hello"); code != 200 ||
		b != `[{"name":"b.txt","type":"file","path":"/tmp/a/b.txt"}]`+"\n" {
		t.Errorf("upload: %d %s", code, b)
	}
	// Several files name their paths in their parts; relative ones are
	// taken from the home directory.
	if code, b := upload("?username=user", "/workspace/x/1.txt", "one", "rel/2.txt", "two"); code != 200 ||
		!strings.Contains(b, `"path":"/workspace/x/1.txt"`) || !strings.Contains(b, `"path":"`+service.HomeDir+`/rel/2.txt"`) {
		t.Errorf("upload of two: %d %s", code, b)
	}
	if e.files.byPath["sba:/tmp/a/b.txt"] != "hello" || e.files.byPath["sba:/workspace/x/1.txt"] != "one" || e.files.byPath["sba:"+service.HomeDir+"/rel/2.txt"] != "two" {
		t.Errorf("files %v", e.files.byPath)
	}
	if code, b := e.in(t, "sba", EnvdPort, "GET", "/files?path=rel%2F2.txt", ""); code != 200 || b != "two" {
		t.Errorf("download: %d %s", code, b)
	}
	if code, b := e.in(t, "sba", EnvdPort, "GET", "/files?path=%2Fnope", ""); code != 404 || !strings.Contains(b, `"code":404`) {
		t.Errorf("download of a missing file: %d %s", code, b)
	}
	for _, tc := range []struct {
		query string
		files []string
		want  string
	}{
		{"?username=root&path=%2Ftmp%2Fx", []string{"/tmp/x", "x"}, "username"},
		{"?path=%2Ftmp%2Fx&signature=abc", []string{"/tmp/x", "x"}, "signature"},
		{"?path=" + strings.Repeat("a", 5000), []string{"p", "x"}, "at most 4095"},
		{"?path=%2Ftmp%2Fx", []string{"/tmp/x", "x", "/tmp/y", "y"}, "path names one file"},
		{"", []string{"/tmp/x", "x", strings.Repeat("a", 5000), "y"}, "at most 4095"},
		{"", nil, "no file"},
	} {
		// A body refused at any part writes none of its files.
		before := len(e.files.byPath)
		if code, b := upload(tc.query, tc.files...); code != 400 || !strings.Contains(b, tc.want) || len(e.files.byPath) != before {
			t.Errorf("upload %s %v: %d %s, %d files written; want 400 with %q, none written", tc.query, tc.files, code, b, len(e.files.byPath)-before, tc.want)
		}
	}
	// The octet-stream bodies of envd 0.5.7, plain or gzip-compressed.
	var gz strings.Builder
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("zipped"))
	_ = zw.Close()
	for _, tc := range []struct {
		name, query, body string
		headers           []string
		status            int
		want              string // in the answer
		stored            string // at /tmp/x
	}{
		{"raw", "?path=%2Ftmp%2Fx", "raw", []string{"Content-Type", "application/octet-stream"}, 200,
			`[{"name":"x","type":"file","path":"/tmp/x"}]`, "raw"},
		{"gzip", "?path=%2Ftmp%2Fx", gz.String(), []string{"Content-Type", "application/octet-stream", "Content-Encoding", "gzip"}, 200,
			`"path":"/tmp/x"`, "zipped"},
		{"not gzip", "?path=%2Ftmp%2Fx", "plain", []string{"Content-Type", "application/octet-stream", "Content-Encoding", "gzip"}, 400, "gzip", ""},
		{"other encoding", "?path=%2Ftmp%2Fx", "x", []string{"Content-Type", "application/octet-stream", "Content-Encoding", "br"}, 400, "Content-Encoding", ""},
		{"no path", "", "x", []string{"Content-Type", "application/octet-stream"}, 400, "path is required", ""},
		{"other type", "?path=%2Ftmp%2Fx", "x", []string{"Content-Type", "text/plain"}, 400, "octet-stream", ""},
	} {
		delete(e.files.byPath, "sba:/tmp/x")
		headers := append([]string{HeaderSandboxID, "sba", HeaderAccessToken, token}, tc.headers...)
		code, _, b := e.do(t, "POST", "/files"+tc.query, tc.body, headers...)
		if code != tc.status || !strings.Contains(b, tc.want) || e.files.byPath["sba:/tmp/x"] != tc.stored {
			t.Errorf("%s upload: %d %s, stored %q; want %d with %q, stored %q", tc.name, code, b, e.files.byPath["sba:/tmp/x"], tc.status, tc.want, tc.stored)
		}
	}
}

func TestHostTarget(t *testing.T) {
	for host, want := range map[string]string{
		"49983-abc123.e2b.example.com": "abc123 49983",
		"8080-sba.localhost:8080":      "sba 8080",
		"127.0.0.1:8080":               "",
		"localhost:8080":               "",
		"49983-abc":                    "", // no domain
		"api.example.com":              "",
		"x8080-sba.example.com":        "",
		"8080-SBA.example.com":         "",
		"8080-sb_a.example.com":        "",
		"123456-sba.example.com":       "",
		"8080-.example.com":            "",
		"[::1]:8080":                   "",
	} {
		id, port, ok := HostTarget(host)
		got := ""
		if ok {
			got = id + " " + port
		}
		if got != want {
			t.Errorf("HostTarget(%q) = %q, want %q", host, got, want)
		}
	}

	e := newEnv(t, running("sba", nil))
	get := func(host, path string, headers ...string) (int, string) {
		t.Helper()
		code, _, b := e.do(t, "GET", path, "", append([]string{"Host", host}, headers...)...)
		return code, b
	}
	// The host wins over the path: /sandboxes here is the sandbox's.
	if code, b := get("49999-sba.sb.example.com", "/health", HeaderAccessToken, token); code != 200 || !strings.Contains(b, "OK") {
		t.Errorf("interpreter by host: %d %s", code, b)
	}
	if code, _ := get("8080-sba.sb.example.com", "/sandboxes", HeaderAccessToken, token); code != 298 ||
		e.port[len(e.port)-1].URL.Path != "/sandboxes" {
		t.Errorf("user port by host: %d", code)
	}
	if code, b := get("49983-nosuch.sb.example.com", "/health", HeaderAccessToken, token); code != 502 || !strings.Contains(b, sandboxNotFoundText) {
		t.Errorf("unknown sandbox by host: %d %s", code, b)
	}
	if code, _ := get("49983-sba.sb.example.com", "/health"); code != 401 {
		t.Errorf("no token by host: %d, want 401", code)
	}
	if code, _ := get("api.example.com", "/health"); code != 299 {
		t.Errorf("another host: %d, want agent2env's own route", code)
	}
}

// hostCase is a request to a port by the host form, with its headers, on
// a daemon that keeps every port private or not, and its answer's status
// and a part of its body.
type hostCase struct {
	name    string
	host    string
	headers []string
	private bool // Config.PrivatePorts
	status  int
	body    string
}

// TestPublicPorts checks E2B's public ports: through the host form, a
// user port of a sandbox the E2B API made public answers without a token;
// envd's and the interpreter's ports, header-routed requests, sandboxes
// made private and a daemon that keeps every port private require it.
func TestPublicPorts(t *testing.T) {
	mark := map[string]string{MetadataPublicTraffic: "true", "a": "b"}
	paused := running("pubpaused", mark)
	paused.Status = api.StatusPaused
	e := newEnv(t, running("pub", mark), running("priv", map[string]string{"a": "b"}), paused)
	tok := []string{HeaderTrafficToken, token}
	for _, tc := range []hostCase{
		{"public port", "3000-pub.localhost:8080", nil, false, 298, ""},
		{"public port, a wrong token", "3000-pub.localhost:8080", []string{HeaderAccessToken, "x"}, false, 298, ""},
		{"public port, the token", "3000-pub.localhost:8080", tok, false, 298, ""},
		{"envd keeps its token", "49983-pub.localhost:8080", nil, false, 401, "missing access token"},
		{"interpreter keeps its token", "49999-pub.localhost:8080", nil, false, 401, "missing access token"},
		{"by headers", "localhost:8080", []string{HeaderSandboxID, "pub", HeaderSandboxPort, "3000"}, false, 403, "'e2b-traffic-access-token' is missing"},
		{"private sandbox", "3000-priv.localhost:8080", nil, false, 403, `{"sandboxId":"priv","message":"Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing","code":403}`},
		{"private sandbox, a wrong token", "3000-priv.localhost:8080", []string{HeaderTrafficToken, "x"}, false, 403, "Provided token in header 'e2b-traffic-access-token' is invalid"},
		{"private sandbox, the traffic token", "3000-priv.localhost:8080", tok, false, 298, ""},
		{"paused", "3000-pubpaused.localhost:8080", nil, false, 502, "is paused"},
		{"unknown sandbox", "3000-nosuch.localhost:8080", nil, false, 502, sandboxNotFoundText},
		{"private daemon", "3000-pub.localhost:8080", nil, true, 403, "'e2b-traffic-access-token' is missing"},
		{"private daemon, the token", "3000-pub.localhost:8080", tok, true, 298, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.h.cfg.PrivatePorts = tc.private
			n, reads := len(e.port), e.sb.reads
			code, _, b := e.do(t, "GET", "/app.js?v=1", "", append([]string{"Host", tc.host}, tc.headers...)...)
			if code != tc.status || !strings.Contains(b, tc.body) {
				t.Fatalf("%d %s, want %d with %q", code, b, tc.status, tc.body)
			}
			// The sandbox is read once, whatever the answer (the gateway
			// does not check it again).
			if got := e.sb.reads - reads; got != 1 {
				t.Errorf("the sandbox was read %d times, want 1", got)
			}
			if code != 298 {
				if len(e.port) != n {
					t.Errorf("the request reached the gateway")
				}
				return
			}
			// No token reaches the sandbox.
			r := e.port[len(e.port)-1]
			id := strings.Split(strings.SplitN(tc.host, "-", 2)[1], ".")[0]
			if r.id != id || r.port != 3000 || r.Header.Get(HeaderAccessToken) != "" || r.Header.Get(HeaderTrafficToken) != "" || r.URL.RequestURI() != "/app.js?v=1" {
				t.Errorf("gateway request %s %d %s %v", r.id, r.port, r.URL, r.Header)
			}
		})
	}
	e.h.cfg.PrivatePorts = false

	// The details say whether the ports are public; the mark is not
	// E2B's metadata.
	for id, want := range map[string]bool{"pub": true, "priv": false} {
		code, _, b := e.api(t, "GET", "/sandboxes/"+id, "")
		var got struct {
			Metadata map[string]string `json:"metadata"`
			Network  struct {
				AllowPublicTraffic *bool `json:"allowPublicTraffic"`
			} `json:"network"`
		}
		if err := json.Unmarshal([]byte(b), &got); err != nil || code != 200 {
			t.Fatalf("get %s: %d %s", id, code, b)
		}
		if got.Network.AllowPublicTraffic == nil || *got.Network.AllowPublicTraffic != want || !maps.Equal(got.Metadata, map[string]string{"a": "b"}) {
			t.Errorf("get %s: %s, want allowPublicTraffic %v and metadata a=b alone", id, b, want)
		}
	}
	if code, _, b := e.api(t, "GET", "/v2/sandboxes", ""); code != 200 || strings.Contains(b, MetadataPublicTraffic) {
		t.Errorf("list: %d %s, want no %s", code, b, MetadataPublicTraffic)
	}
	e.h.cfg.PrivatePorts = true
	if _, _, b := e.api(t, "GET", "/sandboxes/pub", ""); !strings.Contains(b, `"allowPublicTraffic":false`) {
		t.Errorf("get on a private daemon: %s, want allowPublicTraffic false", b)
	}
}

// TestPortPreflight checks the CORS preflight a browser sends, without
// the token, before a request across origins that carries it (Chrome's
// headers): to a user port named by the host, the gateway answers it,
// public or private, known sandbox or not, without reading one; any other
// request, OPTIONS too, still needs the token.
func TestPortPreflight(t *testing.T) {
	e := newEnv(t, running("pub", map[string]string{MetadataPublicTraffic: "true"}), running("priv", nil))
	chrome := []string{"Origin", "http://app.localhost:5173", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type,e2b-traffic-access-token",
		"Sec-Fetch-Mode", "cors", "Sec-Fetch-Site", "same-site", "Sec-Fetch-Dest", "empty"}
	for _, tc := range []hostCase{
		{"private sandbox", "3000-priv.localhost:8080", chrome, false, 297, ""},
		{"public sandbox", "3000-pub.localhost:8080", chrome, false, 297, ""},
		{"private daemon", "3000-pub.localhost:8080", chrome, true, 297, ""},
		{"unknown sandbox", "3000-nosuch.localhost:8080", chrome, false, 297, ""},
		{"OPTIONS that is no preflight", "3000-priv.localhost:8080", []string{"Origin", "http://app.localhost:5173"}, false, 403, "'e2b-traffic-access-token' is missing"},
		{"envd's port", "49983-priv.localhost:8080", chrome, false, 401, "missing access token"},
		{"by headers", "localhost:8080", append([]string{HeaderSandboxID, "priv", HeaderSandboxPort, "3000"}, chrome...), false, 403, "'e2b-traffic-access-token' is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.h.cfg.PrivatePorts = tc.private
			defer func() { e.h.cfg.PrivatePorts = false }()
			n, preflights, reads := len(e.port), e.preflights, e.sb.reads
			code, _, b := e.do(t, "OPTIONS", "/api/data", "", append([]string{"Host", tc.host}, tc.headers...)...)
			if code != tc.status || !strings.Contains(b, tc.body) {
				t.Fatalf("%d %s, want %d with %q", code, b, tc.status, tc.body)
			}
			if len(e.port) != n {
				t.Errorf("the preflight was forwarded to the sandbox")
			}
			if answered := e.preflights - preflights; answered != map[bool]int{true: 1}[code == 297] {
				t.Errorf("the gateway answered %d preflights", answered)
			}
			if code == 297 && e.sb.reads != reads {
				t.Errorf("a preflight read the sandbox %d times", e.sb.reads-reads)
			}
		})
	}
}

// TestPortErrorsReadable: a page on another origin reads why a sandbox's
// port by host form did not answer, as it reads the port's own answers.
func TestPortErrorsReadable(t *testing.T) {
	e := newEnv(t, running("priv", nil))
	for host, want := range map[string]int{
		"3000-priv.localhost:8080":   http.StatusForbidden, // no traffic token
		"3000-nosuch.localhost:8080": http.StatusBadGateway,
	} {
		code, h, b := e.do(t, "GET", "/", "", "Host", host, "Origin", "http://app.localhost:5173")
		if code != want || h.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d %v %s, want %d readable by any origin", host, code, h, b, want)
		}
	}
}

func TestServesSite(t *testing.T) {
	h, err := New(Config{Sandboxes: newFakeSandboxes()})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"3000-sba.localhost:8080":  true,
		"8080-sba.sb.example.com":  true,
		"49983-sba.localhost:8080": false,
		"49999-sba.localhost:8080": false,
		"localhost:8080":           false,
		"sb.example.com":           false,
		"3000-sba":                 false,
		"3000-SBA.localhost":       false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		if got := h.ServesSite(r); got != want {
			t.Errorf("ServesSite(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestParseMetadata checks the list's metadata filter as the SDKs send it:
// each key and value encoded (Python's quote, JavaScript's
// encodeURIComponent), the pairs joined as a query string; the request's
// own encoding is undone before it gets here.
func TestParseMetadata(t *testing.T) {
	sdk := func(md map[string]string) string { // e2b's paginator, less the HTTP client's layer
		quote := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
		v := url.Values{}
		for k, x := range md {
			v.Set(quote(k), quote(x))
		}
		return v.Encode()
	}
	for _, tc := range []struct {
		name, raw string
		want      map[string]string
		wantErr   bool
	}{
		{name: "plain", raw: sdk(map[string]string{"suite": "x"}), want: map[string]string{"suite": "x"}},
		{name: "escaped", raw: sdk(map[string]string{"user": "john doe", "q": "a&b=c%", "ü": "ß/+"}),
			want: map[string]string{"user": "john doe", "q": "a&b=c%", "ü": "ß/+"}},
		{name: "empty value", raw: "k=", want: map[string]string{"k": ""}},
		{name: "no =", raw: "owner", wantErr: true},
		{name: "no key", raw: "=v", wantErr: true},
		{name: "bad escape", raw: "k=%25zz", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMetadata(tc.raw)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseMetadata(%q): %v, want error %v", tc.raw, err, tc.wantErr)
			}
			if !tc.wantErr && !maps.Equal(got, tc.want) {
				t.Errorf("parseMetadata(%q) = %v, want %v", tc.raw, got, tc.want)
			}
		})
	}
}
