package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/gateway"
	"github.com/agent2env/agent2env/internal/httpapi"
)

var _ httpapi.Routes = (*gateway.Routes)(nil)

// oneSandbox is sandbox "sb" with token "tok" and every port at addr.
type oneSandbox struct{ addr string }

func (o oneSandbox) Authorize(ctx context.Context, id, token string) error {
	switch {
	case token == "":
		return fmt.Errorf("missing access token: %w", errdefs.ErrUnauthenticated)
	case id != "sb":
		return errdefs.NotFound("no sandbox %s", id)
	case token != "tok":
		return fmt.Errorf("invalid access token: %w", errdefs.ErrUnauthenticated)
	}
	return nil
}

func (o oneSandbox) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", o.addr)
}

// Served by the API beside its own routes, behind API-key authentication,
// the gateway answers with its own token and nothing else.
func TestServedByTheAPI(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the sandbox "+r.URL.Path)
	}))
	defer backend.Close()
	g := gateway.New(oneSandbox{addr: strings.TrimPrefix(backend.URL, "http://")}, nil)
	defer g.Close()
	api := httpapi.New(nil, nil, nil, httpapi.WithRoutes(g), httpapi.WithMiddleware(httpapi.AuthMiddleware(nil)))
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	tests := []struct {
		token  string
		status int
		body   string
	}{
		{"", 401, "missing access token"},
		{"wrong", 401, "invalid access token"},
		{"tok", 200, "from the sandbox /x"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/sandbox/sb/port/80/x", nil)
		if tt.token != "" {
			req.Header.Set(gateway.TokenHeader, tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.body) {
			t.Errorf("token %q: %d %q, want %d containing %q", tt.token, resp.StatusCode, b, tt.status, tt.body)
		}
	}
}
