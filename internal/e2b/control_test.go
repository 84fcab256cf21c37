package e2b

import (
	"strings"
	"testing"
	"time"

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

// TestConnectPaused: a connect to a paused sandbox resumes it (201) and
// sets its timeout, unless the timeout is refused, which leaves it paused
// with its expiry; one that another connect resumed meanwhile is answered
// 200, not the resume's 409.
func TestConnectPaused(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		otherResumes bool
		want         int
		wantStatus   api.SandboxStatus
		wantRenewed  bool
	}{
		{name: "resumed", body: `{"timeout":60}`, want: 201, wantStatus: api.StatusRunning, wantRenewed: true},
		{name: "no timeout", body: `{}`, want: 201, wantStatus: api.StatusRunning},
		// Started an hour ago: the longest timeout is an expiry more than
		// MaxInt32 seconds after its start, which the service refuses.
		{name: "timeout refused", body: `{"timeout":2147483647}`, want: 400, wantStatus: api.StatusPaused},
		{name: "resumed by another connect", body: `{"timeout":60}`, otherResumes: true, want: 200, wantStatus: api.StatusRunning, wantRenewed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := running("sbp", nil)
			sb.Status, sb.CreatedAt = api.StatusPaused, now.Add(-time.Hour)
			e := newEnv(t, sb)
			if tt.otherResumes {
				e.sb.beforeResume = func(id string) {
					if _, err := e.sb.move(id, api.StatusPaused, api.StatusRunning); err != nil {
						t.Error(err)
					}
				}
			}
			code, _, body := e.api(t, "POST", "/sandboxes/sbp/connect", tt.body)
			if code != tt.want || (code < 300) != strings.Contains(body, `"sandboxID":"sbp"`) {
				t.Errorf("connect %s: %d %s, want %d", tt.body, code, body, tt.want)
			}
			got, _ := e.sb.Get(t.Context(), "sbp")
			if _, renewed := e.sb.renewed["sbp"]; got.Status != tt.wantStatus || renewed != tt.wantRenewed {
				t.Errorf("after connect %s: %s, renewed %t; want %s, renewed %t", tt.body, got.Status, renewed, tt.wantStatus, tt.wantRenewed)
			}
		})
	}
}

// TestJSONBodyRefused: a control-plane body that is not one JSON value
// of the expected shape is a 400 {code, message} (a body over the limit
// 413), and changes nothing.
func TestJSONBodyRefused(t *testing.T) {
	huge := `{"timeout":60,"x":"` + strings.Repeat("a", maxBody) + `"}`
	tests := []struct {
		name, body string
		want       int
	}{
		{"stray brace", `{"timeout":60}}`, 400},
		{"stray bracket", `{"timeout":60}]`, 400},
		{"two values", `{"timeout":60} {"timeout":70}`, 400},
		{"trailing garbage", `{"timeout":60} x`, 400},
		{"not JSON", `timeout=60`, 400},
		{"wrong type", `{"timeout":"60"}`, 400},
		{"fraction", `{"timeout":60.5}`, 400},
		{"array", `[60]`, 400},
		{"too big", huge, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, running("sba", nil))
			for _, op := range []string{"timeout", "connect"} {
				code, _, body := e.api(t, "POST", "/sandboxes/sba/"+op, tt.body)
				if code != tt.want || !strings.Contains(body, `"code":`) {
					t.Errorf("%s %s: %d %s, want %d", op, tt.name, code, body, tt.want)
				}
			}
			if at, ok := e.sb.renewed["sba"]; ok {
				t.Errorf("its expiry was set to %v", at)
			}
		})
	}
}
