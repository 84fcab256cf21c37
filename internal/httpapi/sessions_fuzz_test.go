package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/store"
)

// sessionPaths are the session operations that decode a body.
var sessionPaths = []string{
	"/api/v1/sessions/execute", "/api/v1/sessions/command",
	"/api/v1/sessions/s1/execute", "/api/v1/sessions/s1/command", "/api/v1/sessions/s1/keepalive",
}

// FuzzSessionEndpoints sends arbitrary bodies to the session operations
// through the real handler (FuzzSessionRequests fuzzes the decoders
// alone), decoders, checks and error mapping, on a host with no room
// for any sandbox: every answer is a 4xx with the error body, or, for a
// request that passed every check, 507 INSUFFICIENT_CAPACITY (404
// SESSION_NOT_FOUND for a keep-alive); never a 5xx else, never a session.
func FuzzSessionEndpoints(f *testing.F) {
	for _, body := range []string{
		`{"code":"1"}`, `{"code":"x = 1","language":"javascript","session_id":"s","timeout":1.5,"flavor":"large"}`,
		`{"command":"echo hi","cwd":"/tmp","env":{"A":"1"}}`, `{"command":["ls","-l"],"timeout":0.5}`,
		`{"command":[]}`, `{"command":5}`, `{"command":[1]}`, `{"command":"x","env":{"=":""}}`, `{"idle_timeout":60}`,
		`{"idle_timeout":-1}`, `{"timeout":1e309}`, `{}`, `[`, `null`, `""`, `{"code":"1","session_id":"a/b"}`,
		`{"code":"1","flavor":"xl"}`, `{"code":"1"} x`, `{"code":"1","session_id":"s2"}`, `{"code":"\u0000"}`,
	} {
		for i := range sessionPaths {
			f.Add(uint8(i), body)
		}
	}
	h, st := newSessionHandler(f, manager.Config{Host: manager.Host{MilliCPU: 1, MemoryBytes: 1}, CPUOvercommit: 1, MemoryOvercommit: 1})
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := sessionPaths[int(which)%len(sessionPaths)]
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		resp := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		keepAlive := strings.HasSuffix(path, "/keepalive")
		switch {
		case rec.Code == http.StatusInsufficientStorage && !keepAlive:
			var re api.ResourceError
			if err := json.Unmarshal(resp.body, &re); err != nil || re.Code != api.CodeInsufficientCapacity || re.Suggestion == "" || re.Usage.MilliCPUCapacity != 1 {
				t.Errorf("%s %q: 507 body %s", path, body, resp.body)
			}
		case rec.Code == http.StatusNotFound && keepAlive:
			checkErrorBody(t, resp.body, api.CodeSessionNotFound)
		case rec.Code >= 400 && rec.Code < 500 && rec.Code != http.StatusNotFound:
			checkErrorBody(t, resp.body, "")
		default:
			t.Errorf("%s %q: %d %s", path, body, rec.Code, resp.body)
		}
		if n, err := st.CountSessions(context.Background()); err != nil || n != 0 {
			t.Errorf("%s %q made sessions: %d %v", path, body, n, err)
		}
		if all, _, err := st.ListSandboxPage(context.Background(), store.SandboxFilter{}, store.Page{}); err != nil || len(all) != 0 {
			t.Errorf("%s %q made sandboxes: %d %v", path, body, len(all), err)
		}
	})
}
