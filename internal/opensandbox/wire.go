package opensandbox

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/service"
)

// Sandboxes is what the surface needs of the sandbox service.
type Sandboxes interface {
	CreateAndWait(ctx context.Context, req api.CreateSandboxRequest, wait time.Duration) (*api.Sandbox, error)
	Get(ctx context.Context, id string) (*api.Sandbox, error)
	List(ctx context.Context, opts service.ListOptions) (*api.SandboxList, error)
	Count(ctx context.Context, opts service.ListOptions) (int, error)
	Delete(ctx context.Context, id string) error
	// Renew makes sandbox id expire at at.
	Renew(ctx context.Context, id string, at time.Time) (*api.Sandbox, error)
	// PatchMetadata applies a merge patch to sandbox id's metadata: a
	// value sets its key, nil deletes it.
	PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*api.Sandbox, error)
	// Pause freezes sandbox id's processes in memory; Resume lets them go
	// on. Both are done when they return.
	Pause(ctx context.Context, id string) (*api.Sandbox, error)
	Resume(ctx context.Context, id string) (*api.Sandbox, error)
}

var _ Sandboxes = (*service.Sandboxes)(nil)

// OpenSandbox's states (spec SandboxState).
const (
	statePending    = "Pending"
	stateRunning    = "Running"
	statePaused     = "Paused"
	stateStopping   = "Stopping"
	stateTerminated = "Terminated"
	stateFailed     = "Failed"
)

// defaultEntrypoint is the SDKs' entrypoint when the caller gives none:
// a sandbox whose only process waits. agent2env sandboxes made from an
// image have no main process, which is the same.
var defaultEntrypoint = []string{"tail", "-f", "/dev/null"}

// sandboxStates are OpenSandbox's states (spec SandboxState), in lower
// case: the names a list may filter by.
var sandboxStates = []string{"pending", "running", "pausing", "paused", "resuming", "stopping", "terminated", "failed"}

// statuses returns the agent2env statuses an OpenSandbox state (any case)
// stands for: none for the states agent2env has no sandbox in (Pausing and
// Resuming: a pause or resume is done before its 202) and for names that
// are not in sandboxStates.
func statuses(st string) []api.SandboxStatus {
	switch strings.ToLower(st) {
	case "pending":
		return []api.SandboxStatus{api.StatusPending}
	case "running":
		return []api.SandboxStatus{api.StatusRunning}
	case "paused":
		return []api.SandboxStatus{api.StatusPaused}
	case "stopping":
		return []api.SandboxStatus{api.StatusTerminating}
	case "terminated":
		return []api.SandboxStatus{api.StatusSucceeded}
	case "failed":
		return []api.SandboxStatus{api.StatusFailed, api.StatusUnknown}
	}
	return nil
}

// state returns the OpenSandbox state of an agent2env status.
func state(s api.SandboxStatus) string {
	switch s {
	case api.StatusPending:
		return statePending
	case api.StatusRunning:
		return stateRunning
	case api.StatusPaused:
		return statePaused
	case api.StatusTerminating:
		return stateStopping
	case api.StatusSucceeded:
		return stateTerminated
	default: // failed, unknown, and statuses this version does not know
		return stateFailed
	}
}

// imageSpec is ImageSpec.
type imageSpec struct {
	URI  string          `json:"uri"`
	Auth json.RawMessage `json:"auth,omitempty"`
}

// sandboxStatus is SandboxStatus.
type sandboxStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// sandboxView is Sandbox, and CreateSandboxResponse without Image.
type sandboxView struct {
	ID         string            `json:"id"`
	Image      *imageSpec        `json:"image,omitempty"`
	Status     sandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	// ExpiresAt is absent, never null, when the sandbox does not expire:
	// the Python SDK parses any value present as a time.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
}

// view returns sb as OpenSandbox shows it; the image is left out when
// withImage is false (the create response).
func view(sb *api.Sandbox, withImage bool) sandboxView {
	out := sandboxView{
		ID:         sb.ID,
		Status:     sandboxStatus{State: state(sb.Status), Message: sb.Reason},
		Metadata:   sb.Metadata,
		Entrypoint: defaultEntrypoint,
		CreatedAt:  sb.CreatedAt.UTC(),
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if !sb.UpdatedAt.IsZero() {
		at := sb.UpdatedAt.UTC()
		out.Status.LastTransitionAt = &at
	}
	if withImage && sb.Image != "" {
		out.Image = &imageSpec{URI: sb.Image}
	}
	if sb.TTL != 0 && !sb.ExpiresAt.IsZero() && !sb.ExpiresAt.Equal(api.Never) {
		at := sb.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	return out
}

// pagination is PaginationInfo.
type pagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// listResponse is ListSandboxesResponse.
type listResponse struct {
	Items      []sandboxView `json:"items"`
	Pagination pagination    `json:"pagination"`
}

// endpointView is Endpoint.
type endpointView struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// renewBody is RenewSandboxExpirationRequest and its response.
type renewBody struct {
	ExpiresAt *time.Time `json:"expiresAt"`
}

// errorBody is ErrorResponse: both fields always present.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers err as {code, message}, with errdefs' status and
// code.
func writeError(w http.ResponseWriter, err error) {
	status, code := errdefs.HTTPStatus(err)
	writeErrorStatus(w, status, code, err.Error())
}

func writeErrorStatus(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Code: code, Message: message})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(errorBody{Code: api.CodeInternal, Message: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// decodeJSON reads r's body, which must be JSON (application/json: a web
// page cannot send it across origins unasked), into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSONLimit(w, r, v, maxBody)
}

// decodeJSONLimit is decodeJSON for a body of up to limit bytes.
func decodeJSONLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errdefs.WithCode(errdefs.Invalid("the body must be application/json"), api.CodeUnsupportedMediaType)
	}
	err = jsonbody.Decode(w, r, v, limit, false)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.As(err, &tooBig):
		return err
	case errors.Is(err, jsonbody.ErrMore):
		return errdefs.Invalid("%v", err)
	}
	return errdefs.Invalid("the body is not valid JSON of the expected shape: %v", err)
}

// unsupported is a 400 naming a request field agent2env cannot honour.
func unsupported(field, why string) error {
	return errdefs.Invalid("%s: %s", field, why)
}
