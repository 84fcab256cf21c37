package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestCapabilities answers what the runtime says it can do, and only what
// the manager would not refuse: the fake runtime pauses but has no
// checkpoints, so snapshots are off even when it claims them.
func TestCapabilities(t *testing.T) {
	tests := []struct {
		name string
		caps *sandbox.Capabilities // nil: the fake's default
		want api.Capabilities
	}{
		{name: "default", want: api.Capabilities{Runtime: "fake", Pause: true}},
		{name: "no freezer", caps: &sandbox.Capabilities{LocalFiles: true}, want: api.Capabilities{Runtime: "fake"}},
		{name: "checkpoint claimed by a runtime that cannot", caps: &sandbox.Capabilities{Pause: true, Checkpoint: true},
			want: api.Capabilities{Runtime: "fake", Pause: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			if tt.caps != nil {
				e.rt.SetCapabilities(*tt.caps)
			}
			resp := e.do(t, "GET", "/api/v1/capabilities", "", nil)
			var got api.Capabilities
			if resp.status != http.StatusOK || json.Unmarshal(resp.body, &got) != nil || got != tt.want {
				t.Errorf("GET /api/v1/capabilities: %d %s, want 200 %+v", resp.status, resp.body, tt.want)
			}
		})
	}
}
