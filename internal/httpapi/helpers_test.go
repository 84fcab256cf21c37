package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store/sqlite"
	"github.com/agent2env/agent2env/internal/template"
)

// These tests run real in-process agents (package fakeruntime), whose
// reaper waits for every child of the process: nothing here may use
// os/exec.

// fakeImages serves both the manager (Get, Ensure) and the API (List,
// Pull, Build, Import, Remove). Its images have no layers.
type fakeImages struct {
	mu   sync.Mutex
	imgs map[string]*image.Image
	// spool is CreateTemp's directory (the system's when empty);
	// imported, the paths Import was given.
	spool    string
	imported []string
	// ops are what Operations answers.
	ops []image.Operation
}

func (f *fakeImages) Operations() []image.Operation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Follow answers a stored image at once, "follows" the build of a ref
// naming "building" (which then is stored), and finds nothing else.
func (f *fakeImages) Follow(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	f.mu.Lock()
	img := f.imgs[ref]
	f.mu.Unlock()
	switch {
	case img != nil:
	case strings.Contains(ref, "building"):
		if p != nil {
			p(image.Progress{Phase: image.PhaseBuild, Item: "Setting up python3"})
			p(image.Progress{Phase: image.PhaseUnpack, Item: "sha256:layer", Current: 5, Total: 10})
		}
		img = f.add(ref)
	default:
		return nil, errdefs.NotFound("image %s is not stored, and is not being pulled or built", ref)
	}
	if p != nil {
		p(image.Progress{Phase: image.PhaseDone, Item: ref})
	}
	return img, nil
}

func newFakeImages(refs ...string) *fakeImages {
	f := &fakeImages{imgs: map[string]*image.Image{}}
	for _, ref := range refs {
		f.add(ref)
	}
	return f
}

var imageCreated = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func (f *fakeImages) add(ref string) *image.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := &image.Image{Ref: ref, Digest: "sha256:d-" + ref, ID: "sha256:i-" + ref, Size: 42, Created: imageCreated,
		Config: image.Config{Env: []string{"FROM_IMAGE=yes"}}}
	f.imgs[ref] = img
	return img
}

func notFound(ref string) error {
	return errdefs.WithCode(errdefs.NotFound("image %s not found", ref), api.CodeImageNotFound)
}

func (f *fakeImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img := f.imgs[ref]; img != nil {
		return img, nil
	}
	return nil, notFound(ref)
}

// Ensure "pulls" any ref except those naming "missing".
func (f *fakeImages) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return f.Pull(ctx, ref, p)
}

func (f *fakeImages) List(ctx context.Context) ([]*image.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*image.Image
	for _, ref := range slices.Sorted(maps.Keys(f.imgs)) {
		out = append(out, f.imgs[ref])
	}
	return out, nil
}

func (f *fakeImages) Pull(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	if strings.Contains(ref, "missing") {
		return nil, notFound(ref)
	}
	if p != nil {
		p(image.Progress{Phase: image.PhaseResolve, Item: ref})
		p(image.Progress{Phase: image.PhaseDownload, Item: "sha256:layer", Current: 5, Total: 10})
		p(image.Progress{Phase: image.PhaseDone, Item: ref})
	}
	return f.add(ref), nil
}

func (f *fakeImages) Build(ctx context.Context, name string, p image.ProgressFunc) (*image.Image, error) {
	if !strings.HasPrefix(name, "agent2env/") {
		return nil, errdefs.WithCode(errdefs.NotFound("no built-in image %s", name), api.CodeImageNotFound)
	}
	if p != nil {
		p(image.Progress{Phase: image.PhaseBuild, Item: "mmdebstrap"})
	}
	return f.add(name), nil
}

func (f *fakeImages) CreateTemp(pattern string) (*os.File, error) {
	return os.CreateTemp(f.spool, pattern)
}

// Import takes an "archive" whose content is a list of refs, one a line.
func (f *fakeImages) Import(ctx context.Context, path string, p image.ProgressFunc) ([]*image.Image, error) {
	f.mu.Lock()
	f.imported = append(f.imported, path)
	f.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, []byte("archive\n")) {
		return nil, errdefs.Invalid("not an image archive")
	}
	var out []*image.Image
	for _, ref := range strings.Fields(string(b[len("archive\n"):])) {
		out = append(out, f.add(ref))
	}
	return out, nil
}

func (f *fakeImages) Remove(ctx context.Context, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.imgs[ref] == nil {
		return notFound(ref)
	}
	delete(f.imgs, ref)
	return nil
}

// env is the API over a real manager, a fake runtime, fake images and a
// sqlite store, served by httptest.
type env struct {
	url  string
	srv  *Server
	h    http.Handler
	m    *manager.Manager
	rt   *fakeruntime.Runtime
	imgs *fakeImages
	st   *sqlite.Store
}

type envOptions struct {
	notReady bool
	cfg      manager.Config
	metrics  *metrics.Metrics // recorded by the manager and served at /metrics
	opts     []Option         // more server options
	// templates serves templates from the store, which sandboxes can be
	// created from.
	templates bool
	// keys, when set, demands them (AuthMiddlewareWithTickets, with the
	// sandbox service's terminal tickets, then TenantMiddleware) before
	// the middleware of opts.
	keys *auth.Keys
	// now, when set, is the sandbox service's clock.
	now func() time.Time
	// log, when set, is the server's and the manager's log (else none).
	log *slog.Logger
}

// newEnv returns a ready API whose images hold "alpine", removed when the
// test ends.
func newEnv(tb testing.TB, opts envOptions) *env {
	tb.Helper()
	e, closeEnv, err := openEnv(tb.TempDir(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(closeEnv)
	return e
}

// openEnv is newEnv for callers without a testing.TB at hand (fuzz
// functions): the state goes into dir, and closeEnv ends it.
func openEnv(dir string, opts envOptions) (e *env, closeEnv func(), err error) {
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		return nil, nil, err
	}
	imgs := newFakeImages("alpine")
	imgs.spool = filepath.Join(dir, "spool")
	if err := os.Mkdir(imgs.spool, 0o755); err != nil {
		return nil, nil, err
	}
	rt := fakeruntime.New(fakeruntime.WithImages(imgs))
	log := opts.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.cfg.StartTimeout == 0 {
		opts.cfg.StartTimeout = 10 * time.Second
	}
	mopts := []manager.Option{manager.WithMetrics(opts.metrics)}
	sopts := append([]Option{WithMetrics(opts.metrics)}, opts.opts...)
	if opts.templates {
		tpl := template.New(st, template.WithLogger(log))
		mopts = append(mopts, manager.WithTemplates(tpl))
		sopts = append(sopts, WithRoutes(NewTemplateRoutes(tpl)))
	}
	m := manager.New(opts.cfg, rt, st, log, mopts...)
	svcOpts := []service.SandboxesOption{service.WithRuntime(rt)}
	if opts.now != nil {
		svcOpts = append(svcOpts, service.WithClock(opts.now))
	}
	sandboxes := service.NewSandboxes(m, "http://gw.test/", svcOpts...)
	if opts.keys != nil {
		sopts = append([]Option{WithMiddleware(AuthMiddlewareWithTickets(opts.keys, sandboxes)), WithMiddleware(TenantMiddleware)}, sopts...)
	}
	srv := New(sandboxes, service.NewImages(imgs), log, sopts...)
	srv.SetReady(!opts.notReady)
	h := srv.Handler()
	ts := httptest.NewServer(h)
	closeEnv = func() {
		ts.Close()
		m.Close()
		rt.Close()
		st.Close()
	}
	return &env{url: ts.URL, srv: srv, h: h, m: m, rt: rt, imgs: imgs, st: st}, closeEnv, nil
}

// response is a finished request.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) do(tb testing.TB, method, path, ctype string, body io.Reader) response {
	tb.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) postJSON(tb testing.TB, path, body string) response {
	tb.Helper()
	return e.do(tb, http.MethodPost, path, "application/json", strings.NewReader(body))
}

// createSandbox creates a sandbox from body and returns it.
func (e *env) createSandbox(tb testing.TB, body string) api.Sandbox {
	tb.Helper()
	resp := e.postJSON(tb, "/api/v1/sandboxes", body)
	if resp.status != http.StatusCreated {
		tb.Fatalf("create %s: %d %s", body, resp.status, resp.body)
	}
	var sb api.Sandbox
	if err := json.Unmarshal(resp.body, &sb); err != nil {
		tb.Fatal(err)
	}
	return sb
}

// ids lists the sandboxes through the API.
func (e *env) ids(tb testing.TB) []string {
	tb.Helper()
	resp := e.do(tb, http.MethodGet, "/api/v1/sandboxes", "", nil)
	if resp.status != http.StatusOK {
		tb.Fatalf("list: %d %s", resp.status, resp.body)
	}
	var list api.List[api.Sandbox]
	if err := json.Unmarshal(resp.body, &list); err != nil {
		tb.Fatal(err)
	}
	ids := []string{}
	for _, sb := range list.Items {
		ids = append(ids, sb.ID)
	}
	return ids
}

// checkError checks that resp is an error of status with the API's error
// body: {"error": non-empty, "code": code} and nothing else.
func checkError(tb testing.TB, resp response, status int, code string) {
	tb.Helper()
	if resp.status != status {
		tb.Errorf("status %d, want %d (body %s)", resp.status, status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("error content type %q", ct)
	}
	checkErrorBody(tb, resp.body, code)
}

func checkErrorBody(tb testing.TB, body []byte, code string) {
	tb.Helper()
	var eb map[string]any
	if err := json.Unmarshal(body, &eb); err != nil {
		tb.Errorf("error body %q is not JSON: %v", body, err)
		return
	}
	if msg, ok := eb["error"].(string); !ok || msg == "" {
		tb.Errorf("error body %s has no message", body)
	}
	if got, ok := eb["code"].(string); !ok || (code != "" && got != code) || got == "" {
		tb.Errorf("error body %s: code %v, want %q", body, eb["code"], code)
	}
	// A sandbox that is not running names itself and its status besides.
	if eb["code"] == api.CodeSandboxNotReady {
		for _, k := range []string{"sandbox_id", "status"} {
			if v, ok := eb[k].(string); !ok || v == "" {
				tb.Errorf("error body %s has no %s", body, k)
			}
			delete(eb, k)
		}
	}
	if len(eb) != 2 {
		tb.Errorf("error body %s has fields beyond error and code", body)
	}
}

// keys returns the sorted field names of the JSON object b.
func keys(tb testing.TB, b []byte) []string {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatalf("%q is not a JSON object: %v", b, err)
	}
	return slices.Sorted(maps.Keys(m))
}

func checkKeys(tb testing.TB, what string, b []byte, want ...string) {
	tb.Helper()
	slices.Sort(want)
	if diff := cmp.Diff(want, keys(tb, b)); diff != "" {
		tb.Errorf("%s fields (-want +got):\n%s\nbody: %s", what, diff, b)
	}
}

// multipartBody builds a multipart/form-data body from parts given as
// name, value pairs (the "file" part gets a filename), in order.
func multipartBody(tb testing.TB, parts ...string) (string, *bytes.Buffer) {
	tb.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(parts); i += 2 {
		var w io.Writer
		var err error
		if parts[i] == "file" {
			w, err = mw.CreateFormFile("file", "upload.bin")
		} else {
			w, err = mw.CreateFormField(parts[i])
		}
		if err != nil {
			tb.Fatal(err)
		}
		io.WriteString(w, parts[i+1])
	}
	if err := mw.Close(); err != nil {
		tb.Fatal(err)
	}
	return mw.FormDataContentType(), &buf
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	name string
	id   string
	data string
}

// readEvent reads the next event; io.EOF at the end of the stream.
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && ev.name == "" {
				return ev, io.EOF
			}
			return ev, fmt.Errorf("event cut short: %q: %w", line, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev, nil
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
}

func readEvents(tb testing.TB, body []byte) []sseEvent {
	tb.Helper()
	br := bufio.NewReader(bytes.NewReader(body))
	var out []sseEvent
	for {
		ev, err := readEvent(br)
		if err == io.EOF {
			return out
		}
		if err != nil {
			tb.Fatalf("read events of %q: %v", body, err)
		}
		out = append(out, ev)
	}
}

// pageCase is a query of a paged list and the ids its pages list, in
// order, over how many pages.
type pageCase struct {
	query string
	want  []string
	pages int
}

// checkPages reads the list at path with each case's query (a limit
// among it when it takes more than one page), following next cursors, and
// checks the ids and pages it gives; then checks that a bad limit, order
// or cursor is 400 naming its parameter. get sends a GET and returns the
// status and body; page reads a page's ids and next cursor from a body.
func checkPages(t *testing.T, path string, cases []pageCase, get func(target string) (int, []byte), page func(body []byte) ([]string, string, error)) {
	t.Helper()
	for _, tt := range cases {
		var got []string
		pages := 0
		for target := path + tt.query; pages < 100; pages++ {
			code, b := get(target)
			ids, next, err := page(b)
			if code != http.StatusOK || err != nil {
				t.Fatalf("%s: %d %s (%v)", target, code, b, err)
			}
			got = append(got, ids...)
			if next == "" {
				pages++
				break
			}
			target = path + tt.query + "&cursor=" + next
		}
		if !slices.Equal(got, tt.want) || pages != tt.pages {
			t.Errorf("%s%s: %d pages of %v, want %d of %v", path, tt.query, pages, got, tt.pages, tt.want)
		}
	}
	for _, tt := range []struct{ query, param string }{
		{"?order=newest", "order"}, {"?order=DESC", "order"}, {"?limit=0", "limit"}, {"?limit=1001", "limit"},
		{"?limit=x", "limit"}, {"?cursor=nope", "cursor"},
	} {
		code, b := get(path + tt.query)
		if code != http.StatusBadRequest || !strings.Contains(string(b), tt.param+` \"`) {
			t.Errorf("%s%s: %d %s, want 400 naming %s", path, tt.query, code, b, tt.param)
		}
	}
}

// pageIDs returns a function reading a page of a list L from its JSON
// body: the ids and next cursor items reads from it.
func pageIDs[L any](items func(*L) ([]string, string)) func([]byte) ([]string, string, error) {
	return func(b []byte) ([]string, string, error) {
		var l L
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, "", err
		}
		ids, next := items(&l)
		return ids, next, nil
	}
}
