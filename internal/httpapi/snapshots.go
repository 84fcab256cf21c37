package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/agent2env/agent2env/api"
)

// registerSnapshots adds the snapshot routes; a sandbox is made from a
// snapshot by POST /api/v1/sandboxes with from_snapshot.
func (s *Server) registerSnapshots(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/snapshots", snapshotHandler(s.sandboxes.Snapshot))
	mux.HandleFunc("GET /api/v1/snapshots", s.listSnapshots)
	mux.HandleFunc("GET /api/v1/snapshots/{id}", s.getSnapshot)
	mux.HandleFunc("DELETE /api/v1/snapshots/{id}", s.deleteSnapshot)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/fork", forkHandler(s.sandboxes.Fork))
	mux.HandleFunc("POST /api/v1/snapshots/{id}/fork", forkHandler(s.sandboxes.ForkSnapshot))
}

// snapshotHandler serves the taking of a snapshot with snapshot. The
// body may be left out (live), or be empty even when chunked.
func snapshotHandler(snapshot func(context.Context, string, api.CreateSnapshotRequest) (*api.Snapshot, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSnapshotRequest
		if r.ContentLength != 0 {
			if err := decodeStrict(w, r, &req, maxJSONBody); err != nil && !errors.Is(err, errEmptyBody) {
				writeError(w, err)
				return
			}
		}
		snap, err := snapshot(r.Context(), r.PathValue("id"), req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, snap)
	}
}

// listSnapshots lists snapshots, of ?sandbox_id= only when given, a page
// of them with limit, cursor and order.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	page, err := listOptions(r)
	var list *api.SnapshotList
	if err == nil {
		list, err = s.sandboxes.SnapshotPage(r.Context(), r.URL.Query().Get("sandbox_id"), page.Limit, page.Cursor, page.Order)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.sandboxes.GetSnapshot(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.sandboxes.DeleteSnapshot(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forkHandler serves a fork: of a sandbox (a live snapshot of it, then
// the copies) or of a snapshot, as fork does.
func forkHandler(fork func(context.Context, string, api.ForkRequest) (*api.ForkResponse, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.ForkRequest
		if err := decodeStrict(w, r, &req, maxJSONBody); err != nil {
			writeError(w, err)
			return
		}
		out, err := fork(r.Context(), r.PathValue("id"), req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, out)
	}
}
