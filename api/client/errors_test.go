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
