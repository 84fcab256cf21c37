package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/task"
)

// RunRoutes serves task runs.
type RunRoutes struct {
	svc *run.Service
}

// NewRunRoutes returns the run routes of svc.
func NewRunRoutes(svc *run.Service) *RunRoutes { return &RunRoutes{svc: svc} }

// Register adds the routes to mux.
func (s *RunRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/runs", s.submit)
	mux.HandleFunc("GET /api/v1/runs", s.list)
	mux.HandleFunc("GET /api/v1/runs/{id}", s.get)
	mux.HandleFunc("DELETE /api/v1/runs/{id}", s.delete)
	mux.HandleFunc("POST /api/v1/runs/{id}/cancel", s.cancel)
	mux.HandleFunc("GET /api/v1/runs/{id}/events", s.events)
	mux.HandleFunc("GET /api/v1/runs/{id}/logs", s.logs)
	mux.HandleFunc("GET /api/v1/runs/{id}/artifacts", s.artifacts)
	mux.HandleFunc("GET /api/v1/runs/{id}/artifacts/{path...}", s.artifact)
}

// maxSubmitBody bounds a submission: a task file, and its inputs in
// base64.
const maxSubmitBody = task.MaxFileSize + run.MaxInputsBytes*4/3 + maxJSONBody

func (s *RunRoutes) submit(w http.ResponseWriter, r *http.Request) {
	var req api.RunSubmitRequest
	if err := decodeStrict(w, r, &req, maxSubmitBody); err != nil {
		writeError(w, err)
		return
	}
	b, err := s.svc.Submit(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, b)
}

func (s *RunRoutes) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := run.ListOptions{BatchID: q.Get("batch"), Cursor: q.Get("cursor"), Order: api.Order(q.Get("order"))}
	var err error
	if opts.Limit, err = limitParam(r); err == nil {
		opts.Statuses, err = statusParam(r, runStatuses)
	}
	if err == nil {
		opts.Agents, err = listParam(r, "agent", task.Agents)
	}
	if err == nil {
		opts.Models, err = listParam[string](r, "model", nil)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.svc.List(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// runStatuses are the statuses the status parameter of the run list
// takes.
var runStatuses = []api.RunStatus{api.RunQueued, api.RunRunning, api.RunSucceeded, api.RunFailed, api.RunHung,
	api.RunTimeout, api.RunSandboxLost, api.RunCancelled}

func (s *RunRoutes) get(w http.ResponseWriter, r *http.Request) {
	out, err := s.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *RunRoutes) cancel(w http.ResponseWriter, r *http.Request) {
	out, err := s.svc.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *RunRoutes) delete(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// events streams the run's events, each an "event" whose id is its seq:
// after the one ?after= or the Last-Event-ID header (which wins, as a
// reconnecting EventSource sends it) names, else from the first. A
// comment every 15 s keeps an idle stream open through proxies.
func (s *RunRoutes) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := afterParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.svc.Get(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	events := sse.Start(w)
	stop := make(chan struct{})
	defer close(stop)
	go keepAlive(events, stop)
	err = s.svc.Follow(r.Context(), id, after, func(ev api.RunEvent) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event %d of run %s: %w", ev.Seq, id, err)
		}
		return events.Send(sse.Event{ID: strconv.FormatInt(ev.Seq, 10), Name: "event", Data: b})
	})
	if err != nil && r.Context().Err() == nil {
		events.SendJSON("error", errdefs.Body(err))
	}
}

// afterParam is the seq a run's event stream resumes after: the
// Last-Event-ID header's, else the after parameter's, else 0.
func afterParam(r *http.Request) (int64, error) {
	name, v := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if v == "" {
		name, v = "after", r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	after, err := strconv.ParseInt(v, 10, 64)
	if err != nil || after < 0 {
		return 0, errdefs.Invalid("%s %q: want the seq of an event, a non-negative integer", name, v)
	}
	return after, nil
}

func (s *RunRoutes) logs(w http.ResponseWriter, r *http.Request) {
	rc, err := s.svc.Logs(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

func (s *RunRoutes) artifacts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.svc.Get(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", `attachment; filename="`+id+`-artifacts.tar"`)
	w.WriteHeader(http.StatusOK)
	if err := s.svc.ArtifactsTar(r.Context(), id, w); err != nil {
		// The status is sent: cut the response so that the archive does
		// not look complete.
		panic(http.ErrAbortHandler)
	}
}

func (s *RunRoutes) artifact(w http.ResponseWriter, r *http.Request) {
	rc, size, err := s.svc.Artifact(r.Context(), r.PathValue("id"), r.PathValue("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}
