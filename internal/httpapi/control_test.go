package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

func TestControlRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	steps := []struct {
		op, id     string
		status     int
		code       string
		wantStatus api.SandboxStatus // of the sandbox afterwards
	}{
		{"start", id, http.StatusConflict, api.CodeConflict, api.StatusRunning},
		{"stop", id, http.StatusOK, "", api.StatusSucceeded},
		{"stop", id, http.StatusConflict, api.CodeConflict, api.StatusSucceeded},
		{"start", id, http.StatusOK, "", api.StatusRunning},
		{"restart", id, http.StatusOK, "", api.StatusRunning},
		{"stop", "nope", http.StatusNotFound, api.CodeSandboxNotFound, ""},
		{"start", "nope", http.StatusNotFound, api.CodeSandboxNotFound, ""},
		{"restart", "nope", http.StatusNotFound, api.CodeSandboxNotFound, ""},
	}
	for _, st := range steps {
		resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+st.id+"/"+st.op, "", nil)
		if st.code != "" {
			checkError(t, resp, st.status, st.code)
			continue
		}
		var body map[string]string
		if resp.status != st.status || json.Unmarshal(resp.body, &body) != nil || body["message"] != st.op+" requested" {
			t.Fatalf("%s: %d %s", st.op, resp.status, resp.body)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			var sb api.Sandbox
			json.Unmarshal(e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id, "", nil).body, &sb)
			if sb.Status == st.wantStatus {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s: sandbox is %s (%s), want %s", st.op, sb.Status, sb.Reason, st.wantStatus)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
