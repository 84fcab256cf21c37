package errdefs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/google/go-cmp/cmp"
)

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{errdefs.Invalid("x"), http.StatusBadRequest, api.CodeInvalidRequest},
		{errdefs.NotFound("x"), http.StatusNotFound, api.CodeNotFound},
		{errdefs.WithCode(errdefs.NotFound("x"), api.CodeSandboxNotFound), http.StatusNotFound, api.CodeSandboxNotFound},
		{fmt.Errorf("wrapped: %w", errdefs.WithCode(errdefs.NotFound("x"), api.CodeFileNotFound)), http.StatusNotFound, api.CodeFileNotFound},
		{errdefs.Conflict("x"), http.StatusConflict, api.CodeAlreadyExists},
		{errdefs.Precondition("x"), http.StatusConflict, api.CodeConflict},
		{errdefs.WithCode(errdefs.Precondition("x"), api.CodeSandboxNotReady), http.StatusConflict, api.CodeSandboxNotReady},
		{fmt.Errorf("x: %w", errdefs.ErrResourceExhausted), http.StatusTooManyRequests, api.CodeLimitExceeded},
		{errdefs.WithCode(fmt.Errorf("x: %w", errdefs.ErrResourceExhausted), api.CodeNoSpace), http.StatusInsufficientStorage, api.CodeNoSpace},
		{errdefs.WithCode(fmt.Errorf("x: %w", errdefs.ErrResourceExhausted), api.CodeInsufficientCapacity), http.StatusInsufficientStorage, api.CodeInsufficientCapacity},
		{fmt.Errorf("set sandbox x: %w", errdefs.NoSpace(errors.New("database or disk is full"))), http.StatusInsufficientStorage, api.CodeNoSpace},
		{fmt.Errorf("x: %w", errdefs.ErrUnavailable), http.StatusServiceUnavailable, api.CodeUnavailable},
		{errdefs.Unavailable("x"), http.StatusServiceUnavailable, api.CodeUnavailable},
		{fmt.Errorf("x: %w", errdefs.ErrDeadlineExceeded), http.StatusGatewayTimeout, api.CodeTimeout},
		{fmt.Errorf("x: %w", errdefs.ErrNotImplemented), http.StatusNotImplemented, api.CodeNotImplemented},
		{fmt.Errorf("x: %w", errdefs.ErrUnauthenticated), http.StatusUnauthorized, api.CodeUnauthorized},
		{fmt.Errorf("x: %w", errdefs.ErrPermissionDenied), http.StatusForbidden, api.CodeForbidden},
		{fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 1}), http.StatusRequestEntityTooLarge, api.CodeTooLarge},
		{errors.New("disk on fire"), http.StatusInternalServerError, api.CodeInternal},
		// A code of no class does not make an error classified.
		{errdefs.WithCode(errors.New("x"), api.CodeNotFound), http.StatusInternalServerError, api.CodeInternal},
		// A code api does not know takes its class's status.
		{errdefs.WithCode(errdefs.NotFound("x"), "SESSION_NOT_FOUND"), http.StatusNotFound, "SESSION_NOT_FOUND"},
		// The first class of the table wins.
		{fmt.Errorf("%w, %w", errdefs.ErrNotFound, errdefs.ErrInvalidArgument), http.StatusBadRequest, api.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			status, code := errdefs.HTTPStatus(tt.err)
			if status != tt.status || code != tt.code {
				t.Errorf("HTTPStatus = %d %s, want %d %s", status, code, tt.status, tt.code)
			}
		})
	}
}

func TestDetails(t *testing.T) {
	base := errdefs.WithDetails(fmt.Errorf("3 sessions: %w", errdefs.ErrResourceExhausted), map[string]any{"used": 3, "limit": 3})
	outer := errdefs.WithCode(errdefs.WithDetails(fmt.Errorf("create session: %w", base), map[string]any{"used": 4, "suggestion": "delete one"}), api.CodeLimitExceeded)
	tests := []struct {
		name string
		err  error
		want map[string]any
	}{
		{"none", errdefs.NotFound("x"), nil},
		{"one", base, map[string]any{"used": 3, "limit": 3}},
		{"merged, the outer key wins", outer, map[string]any{"used": 4, "limit": 3, "suggestion": "delete one"}},
		{"through a join", errors.Join(errors.New("a"), base), map[string]any{"used": 3, "limit": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, errdefs.Details(tt.err)); diff != "" {
				t.Errorf("Details (-want +got):\n%s", diff)
			}
		})
	}
	if errdefs.WithDetails(nil, map[string]any{"a": 1}) != nil {
		t.Error("WithDetails(nil) is not nil")
	}
	d := map[string]any{"a": 1}
	err := errdefs.WithDetails(errdefs.ErrNotFound, d)
	d["a"] = 2
	if got := errdefs.Details(err)["a"]; got != 1 {
		t.Errorf("details changed with the caller's map: %v", got)
	}
}

func TestWriteHTTP(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{
			name:   "plain, byte for byte as before details",
			err:    errdefs.WithCode(errdefs.NotFound("sandbox <x> not found"), api.CodeSandboxNotFound),
			status: http.StatusNotFound,
			body:   `{"error":"sandbox \u003cx\u003e not found","code":"SANDBOX_NOT_FOUND"}` + "\n",
		},
		{
			name: "details beside error and code, in key order; theirs cannot replace them",
			err: errdefs.WithDetails(errdefs.WithCode(fmt.Errorf("no room: %w", errdefs.ErrResourceExhausted), api.CodeInsufficientCapacity),
				map[string]any{"used": map[string]int{"memory": 5}, "suggestion": "wait", "code": "X", "Error": "y"}),
			status: http.StatusInsufficientStorage,
			body:   `{"error":"no room: resource exhausted","code":"INSUFFICIENT_CAPACITY","suggestion":"wait","used":{"memory":5}}` + "\n",
		},
		{
			name:   "marked with a class: its status and code, its message unchanged",
			err:    fmt.Errorf("pull image x: %w", errdefs.Mark(errors.New("dial tcp: no such host"), errdefs.ErrUnavailable)),
			status: http.StatusServiceUnavailable,
			body:   `{"error":"pull image x: dial tcp: no such host","code":"UNAVAILABLE"}` + "\n",
		},
		{
			name:   "a full disk",
			err:    fmt.Errorf("set sandbox x: %w", errdefs.NoSpace(errors.New("database or disk is full"))),
			status: http.StatusInsufficientStorage,
			body:   `{"error":"set sandbox x: database or disk is full","code":"NO_SPACE"}` + "\n",
		},
		{
			name:   "details that cannot be marshaled are left out",
			err:    errdefs.WithDetails(errdefs.Invalid("bad"), map[string]any{"f": func() {}}),
			status: http.StatusBadRequest,
			body:   `{"error":"bad","code":"INVALID_REQUEST"}` + "\n",
		},
		{
			name:   "a panic's error",
			err:    errors.New("internal error"),
			status: http.StatusInternalServerError,
			body:   `{"error":"internal error","code":"INTERNAL"}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			errdefs.WriteHTTP(rec, tt.err)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if diff := cmp.Diff(tt.body, rec.Body.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClassesEndToEnd walks every class from the error the daemon
// classifies, through the real writer (a response and a stream's error
// event) and the real client, to the client error it becomes.
func TestClassesEndToEnd(t *testing.T) {
	// broader is what each client class also matches.
	broader := map[error][]error{
		client.ErrUnauthenticated:    {client.ErrUnauthorized},
		client.ErrPermissionDenied:   {client.ErrUnauthorized},
		client.ErrAlreadyExists:      {client.ErrConflict},
		client.ErrFailedPrecondition: {client.ErrConflict},
		client.ErrDeadlineExceeded:   {client.ErrUnavailable},
	}
	all := []error{
		client.ErrInvalidArgument, client.ErrUnauthenticated, client.ErrPermissionDenied, client.ErrNotFound,
		client.ErrAlreadyExists, client.ErrFailedPrecondition, client.ErrResourceExhausted, client.ErrInternal,
		client.ErrNotImplemented, client.ErrUnavailable, client.ErrDeadlineExceeded,
		client.ErrUnauthorized, client.ErrConflict,
	}
	tests := []struct {
		name    string
		err     error
		class   error // the errdefs class, nil for none
		status  int
		code    string
		client  error
		details map[string]any // as JSON decodes them
	}{
		{"invalid", errdefs.Invalid("bad"), errdefs.ErrInvalidArgument, 400, api.CodeInvalidRequest, client.ErrInvalidArgument, nil},
		{"invalid yaml", errdefs.WithCode(errdefs.Invalid("bad"), api.CodeInvalidYAML), errdefs.ErrInvalidArgument, 400, api.CodeInvalidYAML, client.ErrInvalidArgument, nil},
		{"unauthenticated", fmt.Errorf("no token: %w", errdefs.ErrUnauthenticated), errdefs.ErrUnauthenticated, 401, api.CodeUnauthorized, client.ErrUnauthenticated, nil},
		{"permission denied", fmt.Errorf("no: %w", errdefs.ErrPermissionDenied), errdefs.ErrPermissionDenied, 403, api.CodeForbidden, client.ErrPermissionDenied, nil},
		{"not found", errdefs.NotFound("gone"), errdefs.ErrNotFound, 404, api.CodeNotFound, client.ErrNotFound, nil},
		{"sandbox not found", errdefs.WithCode(errdefs.NotFound("gone"), api.CodeSandboxNotFound), errdefs.ErrNotFound, 404, api.CodeSandboxNotFound, client.ErrNotFound, nil},
		{"already exists", errdefs.Conflict("twice"), errdefs.ErrAlreadyExists, 409, api.CodeAlreadyExists, client.ErrAlreadyExists, nil},
		{"template exists", errdefs.WithCode(errdefs.Conflict("twice"), api.CodeTemplateExists), errdefs.ErrAlreadyExists, 409, api.CodeTemplateExists, client.ErrAlreadyExists, nil},
		{"failed precondition", errdefs.Precondition("stopped"), errdefs.ErrFailedPrecondition, 409, api.CodeConflict, client.ErrFailedPrecondition, nil},
		{"not ready", errdefs.WithCode(errdefs.Precondition("stopped"), api.CodeSandboxNotReady), errdefs.ErrFailedPrecondition, 409, api.CodeSandboxNotReady, client.ErrFailedPrecondition, nil},
		{
			"resource limit", errdefs.WithDetails(fmt.Errorf("3 of 3: %w", errdefs.ErrResourceExhausted), map[string]any{"used": 3, "limit": 3}),
			errdefs.ErrResourceExhausted, 429, api.CodeLimitExceeded, client.ErrResourceExhausted, map[string]any{"used": 3.0, "limit": 3.0},
		},
		{"no space", errdefs.WithCode(fmt.Errorf("full: %w", errdefs.ErrResourceExhausted), api.CodeNoSpace), errdefs.ErrResourceExhausted, 507, api.CodeNoSpace, client.ErrResourceExhausted, nil},
		{
			"insufficient capacity", errdefs.WithDetails(errdefs.WithCode(fmt.Errorf("no room: %w", errdefs.ErrResourceExhausted), api.CodeInsufficientCapacity), map[string]any{"suggestion": "wait"}),
			errdefs.ErrResourceExhausted, 507, api.CodeInsufficientCapacity, client.ErrResourceExhausted, map[string]any{"suggestion": "wait"},
		},
		{"too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 1}), errdefs.ErrResourceExhausted, 413, api.CodeTooLarge, client.ErrResourceExhausted, nil},
		{"not implemented", fmt.Errorf("pause: %w", errdefs.ErrNotImplemented), errdefs.ErrNotImplemented, 501, api.CodeNotImplemented, client.ErrNotImplemented, nil},
		{"unavailable", errdefs.Unavailable("recovering"), errdefs.ErrUnavailable, 503, api.CodeUnavailable, client.ErrUnavailable, nil},
		{"deadline exceeded", fmt.Errorf("slow: %w", errdefs.ErrDeadlineExceeded), errdefs.ErrDeadlineExceeded, 504, api.CodeTimeout, client.ErrDeadlineExceeded, nil},
		{"internal", errors.New("disk on fire"), nil, 500, api.CodeInternal, client.ErrInternal, nil},
	}
	covered := map[error]bool{}
	byName := map[string]error{}
	for _, tt := range tests {
		byName[tt.name] = tt.err
		covered[tt.class] = true
	}
	for _, class := range errdefs.Classes() {
		if !covered[class] {
			t.Errorf("class %v is not walked here", class)
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/sandboxes/{name}", func(w http.ResponseWriter, r *http.Request) {
		errdefs.WriteHTTP(w, byName[r.PathValue("name")])
	})
	mux.HandleFunc("POST /api/v1/sandboxes/{name}/exec/stream", func(w http.ResponseWriter, r *http.Request) {
		sse.Start(w).SendJSON("error", errdefs.Body(byName[r.PathValue("name")]))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if class, code := errdefs.Classify(tt.err); class != tt.class || code != tt.code {
				t.Errorf("Classify = %v, %s; want %v, %s", class, code, tt.class, tt.code)
			}
			_, getErr := c.Sandbox.Get(t.Context(), tt.name)
			_, streamErr := c.Sandbox.ExecuteStream(t.Context(), tt.name, api.ExecRequest{Command: []string{"true"}}, io.Discard, io.Discard)
			for how, err := range map[string]error{"response": getErr, "stream": streamErr} {
				var apiErr *client.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("%s: %v is not an *APIError", how, err)
				}
				want := &client.APIError{StatusCode: tt.status, Code: tt.code, Message: tt.err.Error(), Details: tt.details}
				if diff := cmp.Diff(want, apiErr); diff != "" {
					t.Errorf("%s: APIError (-want +got):\n%s", how, diff)
				}
				matches := append([]error{tt.client}, broader[tt.client]...)
				for _, class := range all {
					want := false
					for _, m := range matches {
						want = want || m == class
					}
					if got := errors.Is(err, class); got != want {
						t.Errorf("%s: errors.Is(%v, client %v) = %v, want %v", how, err, class, got, want)
					}
				}
			}
		})
	}
}

// TestBodyJSON checks that the body of an error the daemon writes reads
// back the same.
func TestBodyJSON(t *testing.T) {
	body := errdefs.Body(errdefs.WithDetails(errdefs.Invalid("bad"), map[string]any{"field": "cpu", "n": 2.5}))
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var got api.Error
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(body, got); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
	if !strings.HasPrefix(string(b), `{"error":"bad","code":"INVALID_REQUEST",`) {
		t.Errorf("body %s does not start with error and code", b)
	}
}
