package httpapi

import (
	"cmp"
	"net/http"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// ContextRoutes serves code-interpreter contexts: seed 001's /contexts and
// the same under /sandboxes/{id}/contexts.
type ContextRoutes struct {
	svc *service.Contexts
}

// NewContextRoutes returns the context routes of svc.
func NewContextRoutes(svc *service.Contexts) *ContextRoutes { return &ContextRoutes{svc: svc} }

// Register adds the routes to mux.
func (c *ContextRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/contexts", c.create)
	mux.HandleFunc("GET /api/v1/contexts", c.list)
	mux.HandleFunc("GET /api/v1/contexts/{id}", c.get)
	mux.HandleFunc("DELETE /api/v1/contexts/{id}", c.delete)
	mux.HandleFunc("POST /api/v1/contexts/{id}/execute", c.execute)
	mux.HandleFunc("POST /api/v1/contexts/{id}/execute/stream", c.executeStream)

	mux.HandleFunc("POST /api/v1/sandboxes/{id}/contexts", c.create)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/contexts", c.list)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/contexts/{contextId}", c.get)
	mux.HandleFunc("DELETE /api/v1/sandboxes/{id}/contexts/{contextId}", c.delete)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/contexts/{contextId}/execute", c.execute)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/contexts/{contextId}/execute/stream", c.executeStream)
}

func (c *ContextRoutes) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateContextRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	ctx, err := c.svc.Create(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ctx)
}

// list takes the sandbox from the path, else from the query, and the
// page (limit, cursor and order) from the query.
func (c *ContextRoutes) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := listOptions(r)
	var out *api.ContextList
	if err == nil {
		out, err = c.svc.ListPage(r.Context(), cmp.Or(r.PathValue("id"), q.Get("sandbox_id")), q.Get("session_name"), page.Limit, page.Cursor, page.Order)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ids returns the sandbox (empty on the top-level routes) and the context
// a request names.
func ids(r *http.Request) (sandboxID, contextID string) {
	if ctx := r.PathValue("contextId"); ctx != "" {
		return r.PathValue("id"), ctx
	}
	return "", r.PathValue("id")
}

func (c *ContextRoutes) get(w http.ResponseWriter, r *http.Request) {
	sb, id := ids(r)
	ctx, err := c.svc.Get(r.Context(), sb, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ctx)
}

func (c *ContextRoutes) delete(w http.ResponseWriter, r *http.Request) {
	sb, id := ids(r)
	out, err := c.svc.Delete(r.Context(), sb, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *ContextRoutes) execute(w http.ResponseWriter, r *http.Request) {
	var req api.ExecuteRequest
	if err := decodeExecute(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	sb, id := ids(r)
	exe, err := c.svc.Execute(r.Context(), sb, id, req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer exe.Release()
	// Seed 001's clients read why code failed in stderr alone.
	exe.Output.Stderr = service.StderrWithError(exe.Output.Stderr, exe.Error)
	writeJSONText(w, http.StatusOK, exe.ExecuteResponse, &exe.Output.Stdout, &exe.Output.Stderr)
}

// executeStream runs code and streams its output as Server-Sent Events
// (see api.EventStdout and the others).
func (c *ContextRoutes) executeStream(w http.ResponseWriter, r *http.Request) {
	var req api.ExecuteRequest
	if err := decodeExecute(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	sb, id := ids(r)
	run, err := c.svc.Stream(r.Context(), sb, id, req)
	if err != nil {
		writeError(w, err)
		return
	}
	events := sse.Start(w)
	resp, err := run(r.Context(), sseSink{events})
	if err != nil {
		events.SendJSON(api.EventError, errdefs.Body(err))
		return
	}
	if resp.Error != nil {
		events.SendJSON(api.EventError, resp.Error)
	}
	resp.Output = api.ExecutionOutput{} // streamed already
	events.SendJSON(api.EventComplete, resp)
}

// decodeExecute reads an execute request, whose code may be larger than
// other JSON bodies.
func decodeExecute(w http.ResponseWriter, r *http.Request, req *api.ExecuteRequest) error {
	return decodeLimit(w, r, req, service.MaxCodeBytes+maxJSONBody)
}

// sseSink sends an execution's output as events.
type sseSink struct{ events *sse.Writer }

func (s sseSink) Stdout(text string) error {
	return s.events.SendJSON(api.EventStdout, api.ExecutionOutputEvent{Text: text})
}

func (s sseSink) Stderr(text string) error {
	return s.events.SendJSON(api.EventStderr, api.ExecutionOutputEvent{Text: text})
}

func (s sseSink) Result(res api.ExecutionResult) error {
	return s.events.SendJSON(api.EventResult, res)
}
