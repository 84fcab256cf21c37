package e2b

import (
	"encoding/json"
	"testing"

	"github.com/agent2env/agent2env/api"
)

func TestMetrics(t *testing.T) {
	paused := running("sbp", nil)
	paused.Status = api.StatusPaused
	e := newEnv(t, running("sba", nil), running("sbb", nil), paused)

	code, _, body := e.api(t, "GET", "/sandboxes/sba/metrics?start=1&end=2", "")
	var one []map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &one) != nil || len(one) != 1 {
		t.Fatalf("metrics of a running sandbox: %d %s", code, body)
	}
	m := one[0]
	for k, want := range map[string]float64{"cpuCount": 1, "memTotal": 1 << 30, "memUsed": 100 << 20, "memCache": 0, "diskUsed": 0, "diskTotal": 0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v (%s)", k, m[k], want, body)
		}
	}
	// 50 ms of CPU time over a window of about 200 ms of half a CPU.
	if pct, _ := m["cpuUsedPct"].(float64); pct <= 0 || pct > 50 {
		t.Errorf("cpuUsedPct = %v, want in (0, 50]", m["cpuUsedPct"])
	}
	if ts, _ := m["timestamp"].(string); ts == "" || m["timestampUnix"] == nil {
		t.Errorf("no timestamp: %s", body)
	}

	for _, tc := range []struct {
		name, target string
		code         int
		body         string
	}{
		{"paused", "/sandboxes/sbp/metrics", 200, "[]\n"},
		{"unknown", "/sandboxes/nosuch/metrics", 404, ""},
		{"no ids", "/sandboxes/metrics", 400, ""},
	} {
		code, _, body := e.api(t, "GET", tc.target, "")
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.code, tc.body)
		}
	}
	if code, _, _ := e.api(t, "POST", "/sandboxes/sba/metrics", ""); code != 405 {
		t.Errorf("POST metrics: %d, want 405", code)
	}

	code, _, body = e.api(t, "GET", "/sandboxes/metrics?sandbox_ids=sba,sbb,sbp,nosuch", "")
	var many struct {
		Sandboxes map[string]map[string]any `json:"sandboxes"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &many) != nil || len(many.Sandboxes) != 2 ||
		many.Sandboxes["sba"] == nil || many.Sandboxes["sbb"] == nil {
		t.Errorf("metrics of many: %d %s, want sba and sbb", code, body)
	}
}
