package e2b

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Snapshots is what E2B's snapshot API needs of the sandbox service:
// agent2env's snapshots (a sandbox saved whole, its memory with it), which
// create_snapshot, list_snapshots, delete_snapshot and a create whose
// templateID is a snapshot's id map onto (docs/e2b.md §8).
type Snapshots interface {
	// Snapshot saves sandbox id; it is done when it returns.
	Snapshot(ctx context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error)
	// SnapshotPage lists the caller's snapshots a page at a time, of
	// sandbox sandboxID only when it is not empty.
	SnapshotPage(ctx context.Context, sandboxID string, limit *int, cursor string, order api.Order) (*api.SnapshotList, error)
	GetSnapshot(ctx context.Context, id string) (*api.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
}

var _ Snapshots = (*service.Sandboxes)(nil)

// snapshotInfo is E2B's SnapshotInfo. SnapshotID is the agent2env
// snapshot's id, which a create takes as its templateID; Names is always
// empty, as agent2env's snapshots have no names.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func viewSnapshot(snap *api.Snapshot) snapshotInfo {
	return snapshotInfo{SnapshotID: snap.ID, Names: []string{}}
}

// snapshotRequest is SandboxSnapshotRequest.
type snapshotRequest struct {
	// Name would name the snapshot (a template's alias, on E2B).
	Name *string `json:"name"`
	// Memory false asks for the files alone: agent2env's snapshots keep
	// the sandbox's memory, always.
	Memory *bool `json:"memory"`
}

// snapshots returns the snapshot service, or a 501 error when the daemon
// serves none.
func (h *Handler) snapshots() (Snapshots, error) {
	if h.cfg.Snapshots == nil {
		return nil, errdefs.NotImplemented("E2B's snapshots are not served by this daemon")
	}
	return h.cfg.Snapshots, nil
}

// createSnapshot is POST /sandboxes/{id}/snapshots: a live snapshot of
// the sandbox, its processes with their memory and its files; the sandbox
// is frozen while saved and runs on after, as on E2B. 201 SnapshotInfo; an
// ended sandbox is not found; a runtime that cannot snapshot is a 501
// saying so.
func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	svc, err := h.snapshots()
	var body snapshotRequest
	if err == nil {
		err = decodeOptional(w, r, &body, "snapshot", "name and memory")
	}
	switch {
	case err != nil:
	case body.Name != nil && *body.Name != "":
		err = errdefs.Invalid("name: agent2env's snapshots have no names; omit it and create sandboxes from the snapshotID the answer gives")
	case body.Memory != nil && !*body.Memory:
		err = errdefs.Invalid("memory: false: agent2env's snapshots keep the sandbox's memory with its files; omit it or send true")
	default:
		_, err = h.live(r.Context(), id)
	}
	var snap *api.Snapshot
	if err == nil {
		snap, err = svc.Snapshot(r.Context(), id, api.CreateSnapshotRequest{})
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, viewSnapshot(snap))
}

// serveSnapshots is /snapshots: GET lists the caller's snapshots.
func (h *Handler) serveSnapshots(w http.ResponseWriter, r *http.Request) {
	if r.URL.EscapedPath() != "/snapshots" {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	methods(w, r, map[string]http.HandlerFunc{http.MethodGet: h.listSnapshots})
}

// listSnapshots is GET /snapshots: the caller's snapshots newest first,
// of sandboxID when given, limit (at most 100) at a time with X-Next-Token
// when more follow. A name filter, which E2B matches against a snapshot's
// names and id, selects the snapshot of that id, if any.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request) {
	svc, err := h.snapshots()
	q := r.URL.Query()
	limit := maxListLimit
	if err == nil {
		limit, err = parseLimit(q)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	sandboxID := q.Get("sandboxID")
	items := []snapshotInfo{}
	if name := q.Get("name"); name != "" {
		var snap *api.Snapshot
		err := errdefs.NotFound("no snapshot %s", name)
		if service.IsSnapshotID(name) {
			snap, err = svc.GetSnapshot(r.Context(), name)
		}
		switch {
		case err == nil && (sandboxID == "" || snap.SandboxID == sandboxID):
			items = append(items, viewSnapshot(snap))
		case err != nil && !errors.Is(err, errdefs.ErrNotFound):
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, items)
		return
	}
	page, err := svc.SnapshotPage(r.Context(), sandboxID, &limit, q.Get("nextToken"), api.OrderDesc)
	if err != nil {
		writeError(w, err)
		return
	}
	for i := range page.Items {
		items = append(items, viewSnapshot(&page.Items[i]))
	}
	if page.NextCursor != "" {
		w.Header().Set(HeaderNextToken, page.NextCursor)
	}
	writeJSON(w, http.StatusOK, items)
}

// parseLimit reads a list's limit: 1 to maxListLimit, maxListLimit when
// absent, as E2B's.
func parseLimit(q url.Values) (int, error) {
	raw := q.Get("limit")
	if raw == "" {
		return maxListLimit, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, errdefs.Invalid("limit %q: want a whole number from 1 to %d", raw, maxListLimit)
	}
	return n, nil
}

// snapshotTemplate returns the snapshot id that a request for
// /templates/{id} names: E2B's snapshots are templates, and its SDKs
// delete one by DELETE /templates/{id}. False for any other path.
func snapshotTemplate(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/templates/")
	if !ok {
		return "", false
	}
	id, err := url.PathUnescape(rest)
	return id, err == nil && service.IsSnapshotID(id)
}

// serveSnapshotTemplate is /templates/{id} for a snapshot's id: DELETE
// deletes the snapshot (204; 404 when there is none, which the SDKs'
// delete_snapshot reads as false).
func (h *Handler) serveSnapshotTemplate(w http.ResponseWriter, r *http.Request, id string) {
	methods(w, r, map[string]http.HandlerFunc{http.MethodDelete: func(w http.ResponseWriter, r *http.Request) {
		svc, err := h.snapshots()
		if err == nil {
			err = svc.DeleteSnapshot(r.Context(), id)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}})
}
