package client_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

var classes = []error{
	client.ErrBadRequest, client.ErrUnauthorized, client.ErrNotFound,
	client.ErrConflict, client.ErrLimit, client.ErrUnavailable,
}

// checkClass fails unless err matches exactly the class want (none when
// want is nil).
func checkClass(t *testing.T, err, want error) {
	t.Helper()
	for _, class := range classes {
		if got := errors.Is(err, class); got != (class == want) {
			t.Errorf("errors.Is(%v, %v) = %v", err, class, got)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		status int
		code   string
		class  error
	}{
		{http.StatusBadRequest, api.CodeInvalidRequest, client.ErrBadRequest},
		{http.StatusUnauthorized, api.CodeUnauthorized, client.ErrUnauthorized},
		{http.StatusForbidden, api.CodeForbidden, client.ErrUnauthorized},
		{http.StatusNotFound, api.CodeSandboxNotFound, client.ErrNotFound},
		{http.StatusConflict, api.CodeSandboxNotReady, client.ErrConflict},
		{http.StatusRequestEntityTooLarge, api.CodeTooLarge, client.ErrLimit},
		{http.StatusTooManyRequests, api.CodeLimitExceeded, client.ErrLimit},
		{http.StatusInternalServerError, api.CodeInternal, nil},
		{http.StatusNotImplemented, api.CodeNotImplemented, nil},
		{http.StatusServiceUnavailable, api.CodeUnavailable, client.ErrUnavailable},
		{http.StatusGatewayTimeout, api.CodeTimeout, client.ErrUnavailable},
		{http.StatusInsufficientStorage, api.CodeNoSpace, client.ErrLimit},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			c, _ := fakeDaemon(t, reply{status: tt.status, contentType: "application/json",
				body: `{"error":"it went wrong","code":"` + tt.code + `"}`})
			_, err := c.Sandbox.Get(t.Context(), "sb1")
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v is not an *APIError", err)
			}
			want := &client.APIError{StatusCode: tt.status, Code: tt.code, Message: "it went wrong"}
			if diff := cmp.Diff(want, apiErr); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			checkClass(t, err, tt.class)
		})
	}
}

func TestNonJSONErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  string // the error's text
		class error
	}{
		{
			name:  "proxy page",
			reply: reply{status: http.StatusBadGateway, contentType: "text/html", body: "<html>bad gateway</html>\n"},
			want:  "get sandbox sb1: <html>bad gateway</html> (HTTP 502)",
			class: client.ErrUnavailable,
		},
		{
			name:  "empty body",
			reply: reply{status: http.StatusNotFound},
			want:  "get sandbox sb1: Not Found (HTTP 404)",
			class: client.ErrNotFound,
		},
		{
			name:  "json without a message",
			reply: reply{status: http.StatusUnauthorized, body: `{"detail":"no"}`},
			want:  `get sandbox sb1: {"detail":"no"} (HTTP 401)`,
			class: client.ErrUnauthorized,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeDaemon(t, tt.reply)
			_, err := c.Sandbox.Get(t.Context(), "sb1")
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			checkClass(t, err, tt.class)
		})
	}
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  *client.APIError
		class error
	}{
		{
			name:  "image not found",
			body:  "event: progress\ndata: {\"phase\":\"resolve\"}\n\nevent: error\ndata: {\"error\":\"no such image\",\"code\":\"IMAGE_NOT_FOUND\"}\n\n",
			want:  &client.APIError{StatusCode: http.StatusNotFound, Code: api.CodeImageNotFound, Message: "no such image"},
			class: client.ErrNotFound,
		},
		{
			name:  "out of space",
			body:  "event: error\ndata: {\"error\":\"disk full\",\"code\":\"NO_SPACE\"}\n\n",
			want:  &client.APIError{StatusCode: http.StatusInsufficientStorage, Code: api.CodeNoSpace, Message: "disk full"},
			class: client.ErrLimit,
		},
		{
			name: "unknown code",
			body: "event: error\ndata: {\"error\":\"odd\",\"code\":\"NEW_CODE\"}\n\n",
			want: &client.APIError{Code: "NEW_CODE", Message: "odd"},
		},
		{
			name: "malformed",
			body: "event: error\ndata: not json\n\n",
			want: &client.APIError{Message: "malformed error event: not json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeDaemon(t, sseReply(tt.body))
			_, err := c.Image.Pull(t.Context(), "alpine", nil)
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v is not an *APIError", err)
			}
			if diff := cmp.Diff(tt.want, apiErr); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			checkClass(t, err, tt.class)
		})
	}
}

func TestTruncatedStreams(t *testing.T) {
	tests := []struct {
		name string
		call func(c *client.Client) error
	}{
		{"exec without exit", func(c *client.Client) error {
			_, err := c.Sandbox.ExecuteStream(t.Context(), "sb1", api.ExecRequest{}, nil, nil)
			return err
		}},
		{"pull without image", func(c *client.Client) error {
			_, err := c.Image.Pull(t.Context(), "alpine", nil)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The last event has no closing blank line, so it never counts.
			c, _ := fakeDaemon(t, sseReply("event: stdout\ndata: {\"data\":\"x\"}\n\nevent: exit\ndata: {}\n"))
			if err := tt.call(c); err == nil {
				t.Error("succeeded on a truncated stream")
			}
		})
	}
}

// TestErrorClasses checks the daemon's classes an *APIError matches: by
// its code, by its status when the code is unknown, and the broader former
// classes.
func TestErrorClasses(t *testing.T) {
	all := []error{
		client.ErrInvalidArgument, client.ErrUnauthenticated, client.ErrPermissionDenied, client.ErrNotFound,
		client.ErrAlreadyExists, client.ErrFailedPrecondition, client.ErrResourceExhausted, client.ErrInternal,
		client.ErrNotImplemented, client.ErrUnavailable, client.ErrDeadlineExceeded,
		client.ErrUnauthorized, client.ErrConflict,
	}
	tests := []struct {
		name  string
		reply reply
		want  []error
	}{
		{"a code decides a shared status: already exists", reply{status: http.StatusConflict, body: `{"error":"x","code":"TEMPLATE_EXISTS"}`},
			[]error{client.ErrAlreadyExists, client.ErrConflict}},
		{"a code decides a shared status: failed precondition", reply{status: http.StatusConflict, body: `{"error":"x","code":"SANDBOX_NOT_READY"}`},
			[]error{client.ErrFailedPrecondition, client.ErrConflict}},
		{"a 409 of an unknown code is only a conflict", reply{status: http.StatusConflict, body: `{"error":"x","code":"SESSION_BUSY"}`},
			[]error{client.ErrConflict}},
		{"an unknown code takes its status's class", reply{status: http.StatusNotFound, body: `{"error":"x","code":"SESSION_NOT_FOUND"}`},
			[]error{client.ErrNotFound}},
		{"a proxy's timeout", reply{status: http.StatusGatewayTimeout, contentType: "text/html", body: "<html>timeout</html>"},
			[]error{client.ErrDeadlineExceeded, client.ErrUnavailable}},
		{"a proxy's bad gateway", reply{status: http.StatusBadGateway, contentType: "text/html", body: "<html>bad</html>"},
			[]error{client.ErrUnavailable}},
		{"internal", reply{status: http.StatusInternalServerError, body: `{"error":"x","code":"INTERNAL"}`},
			[]error{client.ErrInternal}},
		{"forbidden", reply{status: http.StatusForbidden, body: `{"error":"x","code":"FORBIDDEN"}`},
			[]error{client.ErrPermissionDenied, client.ErrUnauthorized}},
		{"a status of no class", reply{status: http.StatusTeapot}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeDaemon(t, tt.reply)
			_, err := c.Sandbox.Get(t.Context(), "sb1")
			for _, class := range all {
				want := false
				for _, w := range tt.want {
					want = want || w == class
				}
				if got := errors.Is(err, class); got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, class, got, want)
				}
			}
		})
	}
	if client.ErrBadRequest != client.ErrInvalidArgument || client.ErrLimit != client.ErrResourceExhausted {
		t.Error("the former names are not the classes")
	}
}

func TestErrorDetails(t *testing.T) {
	c, _ := fakeDaemon(t, reply{status: http.StatusTooManyRequests, contentType: "application/json",
		body: `{"error":"3 of 3 sessions","code":"RESOURCE_LIMIT","used":3,"limit":3,"suggestion":"delete one"}`})
	_, err := c.Sandbox.Get(t.Context(), "sb1")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err %v is not an *APIError", err)
	}
	want := &client.APIError{StatusCode: http.StatusTooManyRequests, Code: api.CodeLimitExceeded, Message: "3 of 3 sessions",
		Details: map[string]any{"used": 3.0, "limit": 3.0, "suggestion": "delete one"}}
	if diff := cmp.Diff(want, apiErr); diff != "" {
		t.Errorf("APIError (-want +got):\n%s", diff)
	}
	if !errors.Is(err, client.ErrResourceExhausted) || !errors.Is(err, client.ErrLimit) {
		t.Errorf("%v is not ErrResourceExhausted", err)
	}
}

// TestOperationNamedOnce: the client names what it was doing before the
// daemon's message, unless the daemon's message already does.
func TestOperationNamedOnce(t *testing.T) {
	tests := []struct {
		name string
		msg  string // the daemon's message
		call func(*client.Client) error
		want string
	}{
		{
			name: "exec, the daemon says nothing of it",
			msg:  "sandbox sb1 not found",
			call: func(c *client.Client) error {
				_, err := c.Sandbox.Execute(t.Context(), "sb1", api.ExecRequest{Command: []string{"true"}})
				return err
			},
			want: "exec in sandbox sb1: sandbox sb1 not found (INVALID_REQUEST, HTTP 400)",
		},
		{
			name: "exec, the daemon names it",
			msg:  "exec in sandbox sb1: working directory /x does not exist",
			call: func(c *client.Client) error {
				_, err := c.Sandbox.Execute(t.Context(), "sb1", api.ExecRequest{Command: []string{"true"}})
				return err
			},
			want: "exec in sandbox sb1: working directory /x does not exist (INVALID_REQUEST, HTTP 400)",
		},
		{
			name: "remove image, the daemon names the full reference",
			msg:  "remove image docker.io/library/x:1: image docker.io/library/x:1 not found",
			call: func(c *client.Client) error { return c.Image.Remove(t.Context(), "x:1") },
			want: "remove image docker.io/library/x:1: image docker.io/library/x:1 not found (INVALID_REQUEST, HTTP 400)",
		},
		{
			name: "list, another operation's words",
			msg:  "list images: store closed",
			call: func(c *client.Client) error {
				_, err := c.Sandbox.List(t.Context())
				return err
			},
			want: "list sandboxes: list images: store closed (INVALID_REQUEST, HTTP 400)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeDaemon(t, reply{status: http.StatusBadRequest, contentType: "application/json",
				body: `{"error":"` + tt.msg + `","code":"INVALID_REQUEST"}`})
			err := tt.call(c)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			checkClass(t, err, client.ErrBadRequest)
		})
	}
}
