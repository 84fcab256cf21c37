package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// liteBoxdStatuses is the status enum of LiteBoxd's Python SDK
// (models/sandbox.py, SandboxStatus) as its first versions have it; the
// newest add stopped. The SDK checks every sandbox it reads against it.
var liteBoxdStatuses = []string{"pending", "running", "succeeded", "failed", "terminating", "unknown"}

// A paused sandbox reads, in every answer that holds it, as running in
// status, LiteBoxd's clients' enum, and as paused in state; the status
// filter matches state.
func TestPausedSandboxForLiteBoxdClients(t *testing.T) {
	e := newEnv(t, envOptions{})
	paused := e.createSandbox(t, `{"image":"alpine"}`).ID
	running := e.createSandbox(t, `{"image":"alpine"}`).ID
	type wire struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		State  string `json:"state"`
	}
	check := func(what string, sbs []wire) {
		t.Helper()
		for _, sb := range sbs {
			want := wire{sb.ID, "running", "running"}
			if sb.ID == paused {
				want.State = "paused"
			}
			if sb != want || !slices.Contains(liteBoxdStatuses, sb.Status) {
				t.Errorf("%s: %+v, want %+v", what, sb, want)
			}
		}
	}
	decode := func(what string, resp response, v any) {
		t.Helper()
		if resp.status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, resp.status, resp.body)
		}
		if err := json.Unmarshal(resp.body, v); err != nil {
			t.Fatalf("%s: %v: %s", what, err, resp.body)
		}
	}

	var sb wire
	decode("pause", e.do(t, http.MethodPost, "/api/v1/sandboxes/"+paused+"/pause", "", nil), &sb)
	check("pause", []wire{sb})
	decode("get", e.do(t, http.MethodGet, "/api/v1/sandboxes/"+paused, "", nil), &sb)
	check("get", []wire{sb})
	var list api.List[wire]
	decode("list", e.do(t, http.MethodGet, "/api/v1/sandboxes", "", nil), &list)
	if len(list.Items) != 2 {
		t.Errorf("list: %+v, want both sandboxes", list.Items)
	}
	check("list", list.Items)
	decode("list of the paused", e.do(t, http.MethodGet, "/api/v1/sandboxes?status=paused", "", nil), &list)
	if len(list.Items) != 1 || list.Items[0].ID != paused {
		t.Errorf("list of the paused: %+v, want %s alone", list.Items, paused)
	}
	decode("list of the running", e.do(t, http.MethodGet, "/api/v1/sandboxes?status=running", "", nil), &list)
	if len(list.Items) != 1 || list.Items[0].ID != running {
		t.Errorf("list of the running: %+v, want %s alone", list.Items, running)
	}

	// agent2env's Go client reads state.
	var got api.Sandbox
	decode("get", e.do(t, http.MethodGet, "/api/v1/sandboxes/"+paused, "", nil), &got)
	if got.Status != api.StatusPaused {
		t.Errorf("the Go client's sandbox is %s, want paused", got.Status)
	}
}
