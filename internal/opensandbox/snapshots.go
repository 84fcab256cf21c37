package opensandbox

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/service"
)

// Snapshots is what the snapshot routes need of the sandbox service:
// agent2env's snapshots (a sandbox saved whole, its memory with it),
// which OpenSandbox's /snapshots API and a create with snapshotId map
// onto (docs/opensandbox.md §4.11).
type Snapshots interface {
	// Snapshot saves sandbox id; it is done (ready) when it returns.
	Snapshot(ctx context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error)
	// Snapshots lists the caller's snapshots newest first, of sandbox
	// sandboxID only when it is not empty.
	Snapshots(ctx context.Context, sandboxID string) (*api.SnapshotList, error)
	GetSnapshot(ctx context.Context, id string) (*api.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
}

var _ Snapshots = (*service.Sandboxes)(nil)

// OpenSandbox's snapshot states (spec SnapshotState). agent2env records a
// snapshot once saved, so its snapshots are all Ready: a create answers
// Ready, never Creating, and none is ever Deleting or Failed.
const snapshotReady = "Ready"

// snapshotStates are the states the spec names, which a list may filter
// by; of them only snapshotReady selects any of agent2env's.
var snapshotStates = []string{"creating", "deleting", "ready", "failed"}

// snapshotStatus is SnapshotStatus.
type snapshotStatus struct {
	State            string    `json:"state"`
	Reason           string    `json:"reason"`
	Message          string    `json:"message,omitempty"`
	LastTransitionAt time.Time `json:"lastTransitionAt"`
}

// snapshotView is Snapshot. Name is never set: agent2env's snapshots have
// no name, and a create that gives one is refused.
type snapshotView struct {
	ID        string         `json:"id"`
	SandboxID string         `json:"sandboxId"`
	Status    snapshotStatus `json:"status"`
	CreatedAt time.Time      `json:"createdAt"`
}

// snapshotListResponse is ListSnapshotsResponse.
type snapshotListResponse struct {
	Items      []snapshotView `json:"items"`
	Pagination pagination     `json:"pagination"`
}

// viewSnapshot returns snap as OpenSandbox shows it.
func viewSnapshot(snap *api.Snapshot) snapshotView {
	at := snap.CreatedAt.UTC()
	return snapshotView{
		ID:        snap.ID,
		SandboxID: snap.SandboxID,
		Status:    snapshotStatus{State: snapshotReady, Reason: "snapshot_ready", LastTransitionAt: at},
		CreatedAt: at,
	}
}

// snapshots returns the configured snapshot service, or a 501 error
// when the daemon serves none.
func (h *Handler) snapshots() (Snapshots, error) {
	if h.cfg.Snapshots == nil {
		return nil, errdefs.NotImplemented("snapshots are not served by this daemon")
	}
	return h.cfg.Snapshots, nil
}

// createSnapshotRequest is CreateSnapshotRequest, whose one field is
// name.
type createSnapshotRequest struct {
	Name *string `json:"name"`
}

// decodeSnapshotRequest reads the create-snapshot body into req,
// refusing with a 400 naming it a field the spec does not have, rather
// than ignoring it: the caller would think it honoured.
func decodeSnapshotRequest(w http.ResponseWriter, r *http.Request, req *createSnapshotRequest) error {
	var fields map[string]json.RawMessage
	if err := decodeJSON(w, r, &fields); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "name" {
			return unsupported(k, "not a field of CreateSnapshotRequest, whose one field is name")
		}
	}
	if raw, ok := fields["name"]; ok {
		if err := jsonbody.Unmarshal(raw, &req.Name, "name", false); err != nil {
			return errdefs.Invalid("%v", err)
		}
	}
	return nil
}

// createSnapshot saves sandbox id, which must be Running (the spec's
// rule; agent2env could save a paused one too), and answers 202 with the
// snapshot, already Ready. A runtime without snapshots is a 501.
func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	svc, err := h.snapshots()
	if err != nil {
		writeError(w, err)
		return
	}
	var req createSnapshotRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decodeSnapshotRequest(w, r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	if req.Name != nil {
		writeError(w, unsupported("name", "agent2env's snapshots have no name; omit it and keep the snapshot's id"))
		return
	}
	sb, err := h.cfg.Sandboxes.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if st := state(sb.Status); st != stateRunning {
		writeError(w, errdefs.WithCode(errdefs.Conflict("sandbox %s is %s: only a Running sandbox can be snapshotted", id, st), "SANDBOX_NOT_RUNNING"))
		return
	}
	snap, err := svc.Snapshot(r.Context(), id, api.CreateSnapshotRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+url.PathEscape(snap.ID))
	writeJSON(w, http.StatusAccepted, viewSnapshot(snap))
}

func (h *Handler) getSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	svc, err := h.snapshots()
	if err != nil {
		writeError(w, err)
		return
	}
	snap, err := svc.GetSnapshot(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewSnapshot(snap))
}

func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	svc, err := h.snapshots()
	if err != nil {
		writeError(w, err)
		return
	}
	if err := svc.DeleteSnapshot(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listSnapshots answers GET /v1/snapshots: the snapshots of sandboxId (if
// given) in the states asked for (any case; several: any of them),
// newest first, a page at a time. A name filter (the SDKs send one)
// selects none: agent2env's snapshots have no name.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request) {
	svc, err := h.snapshots()
	if err != nil {
		writeError(w, err)
		return
	}
	q, err := strictQuery(r)
	var page, pageSize int
	if err == nil {
		page, pageSize, err = parsePage(q)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	ready := true
	if states := q["state"]; len(states) > 0 {
		ready = false
		for _, st := range states {
			if !slices.Contains(snapshotStates, strings.ToLower(st)) {
				writeError(w, errdefs.Invalid("state %q: want one of Creating, Deleting, Ready, Failed", st))
				return
			}
			ready = ready || strings.EqualFold(st, snapshotReady)
		}
	}
	var all []api.Snapshot
	if ready && !q.Has("name") {
		list, err := svc.Snapshots(r.Context(), q.Get("sandboxId"))
		if err != nil {
			writeError(w, err)
			return
		}
		all = list.Items
	}
	total := len(all)
	start := min((page-1)*pageSize, total)
	end := min(start+pageSize, total)
	items := make([]snapshotView, 0, end-start)
	for i := range all[start:end] {
		items = append(items, viewSnapshot(&all[start+i]))
	}
	pages := (total + pageSize - 1) / pageSize
	writeJSON(w, http.StatusOK, snapshotListResponse{
		Items:      items,
		Pagination: pagination{Page: page, PageSize: pageSize, TotalItems: total, TotalPages: pages, HasNextPage: page < pages},
	})
}

// restoreRequest checks a create with snapshotId and returns agent2env's
// request to make the sandbox from the snapshot. A sandbox made from a
// snapshot has the snapshot's image, resources, environment and network:
// the request may give timeout, metadata, the entrypoints meaning no main
// process, and resourceLimits equal to the snapshot's (the SDKs send
// their default limits on every create); every other field agent2env
// cannot honour is refused by name.
func (h *Handler) restoreRequest(ctx context.Context, req *createRequest) (api.CreateSandboxRequest, error) {
	var out api.CreateSandboxRequest
	svc, err := h.snapshots()
	if err != nil {
		return out, err
	}
	switch {
	case req.Image != nil:
		return out, errdefs.Invalid("give one of image and snapshotId, not both")
	case req.TemplateID != "":
		return out, errdefs.Invalid("give one of templateId and snapshotId, not both")
	case len(req.Env) > 0:
		return out, unsupported("env", "a sandbox made from a snapshot has the snapshot's environment; omit env")
	case !isNull(req.NetworkPolicy):
		return out, unsupported("networkPolicy", "a sandbox made from a snapshot has the snapshot's network; omit networkPolicy")
	}
	if err := req.refuseUnsupported(); err != nil {
		return out, err
	}
	ttl, err := timeoutTTL(req.Timeout)
	if err != nil {
		return out, err
	}
	if len(req.ResourceLimits) > 0 {
		snap, err := svc.GetSnapshot(ctx, req.SnapshotID)
		if err != nil {
			return out, err
		}
		if err := sameResources(req.ResourceLimits, snap); err != nil {
			return out, err
		}
	}
	out.FromSnapshot, out.TTL, out.Metadata = req.SnapshotID, &ttl, req.Metadata
	return out, nil
}

// sameResources refuses limits that are not snap's: cpu and memory equal
// in value to the snapshot's (or absent), nothing else.
func sameResources(limits map[string]string, snap *api.Snapshot) error {
	for k, v := range limits {
		if !service.SnapshotLimit(snap, k, v) {
			return unsupported("resourceLimits."+k, "a sandbox made from a snapshot has the snapshot's resources (cpu "+
				snap.CPU+", memory "+snap.Memory+"); omit resourceLimits or give those")
		}
	}
	return nil
}
