package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// TestOlderAgent: a request an older agent has no route for (a sandbox
// that ran on across an upgrade of the daemon) is ErrOlderAgent, an
// ErrNotImplemented that names the route and says how to update the
// agent, not the NOT_FOUND of a missing sandbox or file; the agent's own
// errors keep their classes.
func TestOlderAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	// The agent's own errors, as it answers them.
	mux.HandleFunc("GET /v1/files", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", errors.New("no such file"))
	})
	mux.HandleFunc("PUT /v1/files", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusInsufficientStorage, "NO_SPACE", errors.New("disk full"))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	defer srv.Close()
	c := NewClient(UnixDialer(sock), "")
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		call      func() error
		class     error
		older     bool
		inMessage string
	}{
		{"unknown path", func() error { _, err := c.StartProc(ctx, ProcRequest{Command: []string{"true"}}); return err },
			errdefs.ErrNotImplemented, true, "POST /v1/procs"},
		{"unknown method of a known path", func() error { return c.sendJSON(ctx, http.MethodPost, "/v1/files", nil, nil, nil) },
			errdefs.ErrNotImplemented, true, "POST /v1/files"},
		{"the agent's not found", func() error { return c.getJSON(ctx, http.MethodGet, "/v1/files", nil, nil) },
			errdefs.ErrNotFound, false, "no such file"},
		{"the agent's other errors", func() error { return c.sendJSON(ctx, http.MethodPut, "/v1/files", nil, nil, nil) },
			errdefs.ErrResourceExhausted, false, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.class) || errors.Is(err, ErrOlderAgent) != tc.older || !strings.Contains(err.Error(), tc.inMessage) {
				t.Errorf("error %v; want class %v, older agent %v, naming %q", err, tc.class, tc.older, tc.inMessage)
			}
			if tc.older && !strings.Contains(err.Error(), "stop and start the sandbox") {
				t.Errorf("error %q does not say how to update the agent", err)
			}
		})
	}
}
