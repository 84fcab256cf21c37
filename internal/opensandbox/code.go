package opensandbox

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Codes is what execd's code routes (docs/opensandbox.md §7.3) need of the
// context service: agent2env's own kernels, scoped to the sandbox.
type Codes interface {
	Create(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error)
	List(ctx context.Context, sandboxID, sessionName string) (*api.ContextList, error)
	Get(ctx context.Context, sandboxID, id string) (*api.Context, error)
	Delete(ctx context.Context, sandboxID, id string) (*api.DeleteContextResponse, error)
	Default(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error)
	Stream(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (func(context.Context, service.Sink) (*api.ExecuteResponse, error), error)
}

var _ Codes = (*service.Contexts)(nil)

// defaultContextName names the context a run without a context id uses:
// execd's default context of its language, made on first use.
const defaultContextName = "opensandbox-default"

// codeTimeout bounds one execution (the context service's maximum):
// execd's runs have no timeout of their own; DELETE /code or a closed
// stream ends them sooner.
const codeTimeout = 24 * 3600

// codeContext is execd's CodeContext.
type codeContext struct {
	ID       string `json:"id,omitempty"`
	Language string `json:"language"`
}

// runCodeRequest is execd's RunCodeRequest.
type runCodeRequest struct {
	Code    string       `json:"code"`
	Context *codeContext `json:"context"`
}

// codeLanguage returns agent2env's language of an execd language name
// ("" is python): python, javascript and bash have kernels here.
func codeLanguage(name string) (string, error) {
	switch strings.ToLower(name) {
	case "", api.LanguagePython:
		return api.LanguagePython, nil
	case api.LanguageJavaScript:
		return api.LanguageJavaScript, nil
	case api.LanguageBash:
		return api.LanguageBash, nil
	}
	return "", unsupported("language", "agent2env runs python, javascript and bash, not "+strconv.Quote(name))
}

func contextView(c *api.Context) codeContext {
	return codeContext{ID: c.ContextID, Language: c.Language}
}

// runs are the code executions and foreground commands in flight, by
// execution id, for DELETE /code?id= and DELETE /command?id= (stock
// execd's interrupt takes the id of either on both).
type runs struct {
	mu sync.Mutex
	m  map[string]runEntry
}

type runEntry struct {
	sandbox string
	cancel  context.CancelFunc
	// done is closed by remove, once the execution has ended.
	done chan struct{}
}

func (r *runs) add(id, sandbox string, cancel context.CancelFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]runEntry{}
	}
	r.m[id] = runEntry{sandbox: sandbox, cancel: cancel, done: make(chan struct{})}
}

func (r *runs) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[id]; ok {
		close(e.done)
		delete(r.m, id)
	}
}

// interrupt cancels execution id of sandbox and returns a channel closed
// once it has ended; nil when there is no such execution.
func (r *runs) interrupt(sandbox, id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[id]
	if !ok || e.sandbox != sandbox {
		return nil
	}
	e.cancel()
	return e.done
}

// routeCode serves op, a path under /code, of sandbox id.
func (h *Handler) routeCode(w http.ResponseWriter, r *http.Request, id, op string) {
	if h.cfg.Codes == nil {
		writeError(w, errdefs.NotImplemented("code contexts are not served here"))
		return
	}
	switch {
	case op == "/code":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost:   func(w http.ResponseWriter, r *http.Request) { h.runCode(w, r, id) },
			http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { h.interruptCode(w, r, id) },
		})
	case op == "/code/context":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.createContext(w, r, id) },
		})
	case op == "/code/contexts":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet:    func(w http.ResponseWriter, r *http.Request) { h.listContexts(w, r, id) },
			http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { h.deleteContexts(w, r, id) },
		})
	case strings.HasPrefix(op, "/code/contexts/") && !strings.Contains(op[len("/code/contexts/"):], "/"):
		cid, err := url.PathUnescape(op[len("/code/contexts/"):])
		if err != nil || cid == "" {
			writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
			return
		}
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet: func(w http.ResponseWriter, r *http.Request) {
				c, err := h.codeContext(r.Context(), id, cid)
				if err != nil {
					writeError(w, err)
					return
				}
				writeJSON(w, http.StatusOK, contextView(c))
			},
			http.MethodDelete: func(w http.ResponseWriter, r *http.Request) {
				_, err := h.codeContext(r.Context(), id, cid)
				if err == nil {
					_, err = h.cfg.Codes.Delete(r.Context(), id, cid)
				}
				if err != nil {
					writeError(w, err)
					return
				}
				w.WriteHeader(http.StatusOK)
			},
		})
	default:
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
	}
}

// codeContext returns context cid of sandbox id for the /code routes,
// which leave bash sessions out (as their list does): a session's id is
// ErrNotFound here.
func (h *Handler) codeContext(ctx context.Context, id, cid string) (*api.Context, error) {
	c, err := h.cfg.Codes.Get(ctx, id, cid)
	if err == nil && c.Name == sessionName {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s has no code context %s", id, cid), api.CodeContextNotFound)
	}
	return c, err
}

func (h *Handler) createContext(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	lang, err := codeLanguage(body.Language)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := h.cfg.Codes.Create(r.Context(), id, api.CreateContextRequest{Language: lang, WorkingDir: body.Cwd})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, contextView(c))
}

// contextsOf returns the contexts of sandbox id in the language of r's
// language query parameter (all when it is absent and not required).
func (h *Handler) contextsOf(r *http.Request, id string, required bool) ([]api.Context, error) {
	name := r.URL.Query().Get("language")
	lang := ""
	if name == "" && required {
		return nil, missingQuery("language")
	}
	if name != "" {
		var err error
		if lang, err = codeLanguage(name); err != nil {
			return nil, err
		}
	}
	list, err := h.cfg.Codes.List(r.Context(), id, "")
	if err != nil {
		return nil, err
	}
	out := make([]api.Context, 0, len(list.Items))
	for _, c := range list.Items {
		if c.Name != sessionName && (lang == "" || c.Language == lang) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (h *Handler) listContexts(w http.ResponseWriter, r *http.Request, id string) {
	cs, err := h.contextsOf(r, id, false)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]codeContext, len(cs))
	for i := range cs {
		out[i] = contextView(&cs[i])
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) deleteContexts(w http.ResponseWriter, r *http.Request, id string) {
	cs, err := h.contextsOf(r, id, true)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, c := range cs {
		if _, err := h.cfg.Codes.Delete(r.Context(), id, c.ContextID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// codeSink turns an execution's output into execd's events.
type codeSink struct{ ew *eventWriter }

func (s codeSink) Stdout(text string) error {
	return s.ew.write(streamEvent{Type: "stdout", Text: text})
}

func (s codeSink) Stderr(text string) error {
	return s.ew.write(streamEvent{Type: "stderr", Text: text})
}

func (s codeSink) Result(res api.ExecutionResult) error {
	return s.ew.write(streamEvent{Type: "result", Results: mimeBundle(res)})
}

// mimeBundle is a result as execd's results: MIME types as keys, except
// text/plain, which is "text".
func mimeBundle(res api.ExecutionResult) map[string]any {
	out := map[string]any{}
	for k, v := range map[string]string{
		"text": res.Text, "text/html": res.HTML, "text/markdown": res.Markdown, "image/svg+xml": res.SVG,
		"image/png": res.PNG, "image/jpeg": res.JPEG, "text/latex": res.LaTeX, "application/javascript": res.JavaScript,
	} {
		if v != "" {
			out[k] = v
		}
	}
	if res.JSON != nil {
		out["application/json"] = res.JSON
	}
	return out
}

// codeError is an execution's error as execd's.
func codeError(e *api.ExecutionError) *streamError {
	tb := []string{}
	if e.Traceback != "" {
		tb = strings.Split(strings.TrimRight(e.Traceback, "\n"), "\n")
	}
	return &streamError{Name: e.Name, Value: e.Value, Traceback: tb}
}

func (h *Handler) runCode(w http.ResponseWriter, r *http.Request, id string) {
	var body runCodeRequest
	if err := decodeJSONLimit(w, r, &body, service.MaxCodeBytes+maxBody); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(body.Code) == "" {
		writeError(w, errdefs.Invalid("code is required"))
		return
	}
	cc := codeContext{}
	if body.Context != nil {
		cc = *body.Context
	}
	ctx := r.Context()
	cid := cc.ID
	var count int
	if cid == "" {
		lang, err := codeLanguage(cc.Language)
		if err != nil {
			writeError(w, err)
			return
		}
		def, err := h.cfg.Codes.Default(ctx, id, api.CreateContextRequest{Language: lang, Name: defaultContextName})
		if err != nil {
			writeError(w, err)
			return
		}
		cid = def.ContextID
	}
	c, err := h.codeContext(ctx, id, cid)
	if err != nil {
		writeError(w, err)
		return
	}
	if cc.Language != "" {
		if lang, err := codeLanguage(cc.Language); err != nil || lang != c.Language {
			writeError(w, errdefs.Invalid("context.language %q is not the language of context %s (%s)", cc.Language, cid, c.Language))
			return
		}
	}
	count = c.ExecutionCount + 1
	run, err := h.cfg.Codes.Stream(ctx, id, cid, api.ExecuteRequest{Code: body.Code, Timeout: codeTimeout})
	if err != nil {
		writeError(w, err)
		return
	}
	ew := h.startStream(w)
	execID := newExecutionID()
	if ew.write(streamEvent{Type: "init", Text: execID}) != nil {
		return
	}
	if ew.write(streamEvent{Type: "execution_count", ExecutionCount: &count}) != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.runs.add(execID, id, cancel)
	defer h.runs.remove(execID)
	stopPings := h.keepAlive(ctx, ew, cancel)
	start := h.cfg.Now()
	resp, err := run(ctx, codeSink{ew: ew})
	stopPings()
	switch {
	case err != nil && ctx.Err() != nil && r.Context().Err() == nil:
		_ = ew.write(streamEvent{Type: "error", Error: &streamError{Name: "KeyboardInterrupt", Value: "interrupted", Traceback: []string{}}})
	case err != nil:
		_ = ew.write(streamEvent{Type: "error", Error: &streamError{Name: "RuntimeError", Value: err.Error(), Traceback: []string{}}})
	case resp.Error != nil:
		_ = ew.write(streamEvent{Type: "error", Error: codeError(resp.Error)})
	default:
		ms := int64(resp.ExecutionTime*1000 + 0.5)
		if resp.ExecutionTime == 0 {
			ms = h.cfg.Now().Sub(start).Milliseconds()
		}
		_ = ew.write(streamEvent{Type: "execution_complete", ExecutionTime: &ms})
	}
}

func (h *Handler) interruptCode(w http.ResponseWriter, r *http.Request, id string) {
	eid := r.URL.Query().Get("id")
	if eid == "" {
		writeError(w, missingQuery("id"))
		return
	}
	if h.runs.interrupt(id, eid) == nil {
		writeError(w, errdefs.NotFound("no execution %s is running in sandbox %s", eid, id))
		return
	}
	w.WriteHeader(http.StatusOK)
}
