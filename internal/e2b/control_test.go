package e2b

import (
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestEndedSandboxOps: E2B forgets a sandbox that has ended, so every
// control-plane call on one (agent2env keeps a stopped or failed sandbox's
// record) is a 404 {code, message}, as get is, and changes nothing: no
// new expiry, no status change (a pause was a 409, which the SDK reads as
// "already paused").
func TestEndedSandboxOps(t *testing.T) {
	ended := []api.Sandbox{
		{ID: "sbdone", Status: api.StatusSucceeded, AccessToken: token},
		{ID: "sbfail", Status: api.StatusFailed, AccessToken: token},
		{ID: "sbterm", Status: api.StatusTerminating, AccessToken: token},
	}
	ops := []struct {
		method, op, body string
	}{
		{"GET", "", ""},
		{"POST", "/timeout", `{"timeout":600}`},
		{"POST", "/refreshes", `{"duration":60}`},
		{"POST", "/pause", ""},
		{"POST", "/connect", `{"timeout":60}`},
		{"GET", "/metrics", ""},
	}
	e := newEnv(t, ended...)
	for _, sb := range ended {
		for _, op := range ops {
			t.Run(sb.ID+op.op, func(t *testing.T) {
				code, _, body := e.api(t, op.method, "/sandboxes/"+sb.ID+op.op, op.body)
				if code != 404 || !strings.Contains(body, `"code":404`) {
					t.Errorf("%s %s: %d %s, want 404", op.method, op.op, code, body)
				}
				got, err := e.sb.Get(t.Context(), sb.ID)
				if err != nil || got.Status != sb.Status {
					t.Errorf("after %s: %v %v, want it %s", op.op, got, err, sb.Status)
				}
				if at, ok := e.sb.renewed[sb.ID]; ok {
					t.Errorf("after %s: its expiry was set to %v", op.op, at)
				}
			})
		}
	}
}
