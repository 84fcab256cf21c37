package e2b

import (
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestTokenOnly: a request that names no sandbox, only its access token,
// reaches that sandbox's envd or code interpreter by its path (older
// SDKs); agent2env's own routes are untouched.
func TestTokenOnly(t *testing.T) {
	mine := running("sbmine", nil)
	mine.AccessToken = "tok-mine"
	paused := running("sbpaused", nil)
	paused.Status, paused.AccessToken = api.StatusPaused, "tok-paused"
	// Three sandboxes before it: the lookup pages through the list.
	e := newEnv(t, running("sba", nil), running("sbb", nil), running("sbc", nil), mine, paused)
	e.checkRoutes(t, []routeCase{
		{"envd health", "GET", "/health", []string{HeaderAccessToken, "tok-mine"}, 204, ""},
		{"process API", "POST", "/process.Process/List", []string{HeaderAccessToken, "tok-mine", "Content-Type", "application/json"}, 200, `{}`},
		{"files", "GET", "/files?path=/nope", []string{HeaderAccessToken, "tok-mine"}, 404, `"code":404`},
		{"interpreter", "GET", "/contexts", []string{HeaderTrafficToken, "tok-mine"}, 200, "[]"},
		{"again, remembered", "GET", "/health", []string{HeaderAccessToken, "tok-mine"}, 204, ""},
		{"unknown token", "GET", "/health", []string{HeaderAccessToken, "tok-nope"}, 502, sandboxNotFoundText},
		{"paused sandbox", "GET", "/health", []string{HeaderAccessToken, "tok-paused"}, 502, sandboxNotFoundText + ": sandbox sbpaused is paused; connect"},
		{"paused sandbox by id", "GET", "/health", []string{HeaderSandboxID, "sbpaused", HeaderAccessToken, "tok-paused"}, 502, "is paused"},
		{"paused sandbox, wrong token", "GET", "/health", []string{HeaderSandboxID, "sbpaused", HeaderAccessToken, "tok-mine"}, 401, ""},
		{"own health without a token", "GET", "/health", nil, 299, ""},
		{"own gateway path with a token", "GET", "/api/v1/sandbox/sbmine/port/80/", []string{HeaderAccessToken, "tok-mine"}, 299, ""},
		{"other path with a token", "GET", "/api/v1/sandboxes", []string{HeaderAccessToken, "tok-mine"}, 299, ""},
	})
	// A remembered token whose sandbox has ended is looked up afresh: not
	// found.
	e.sb.mu.Lock()
	e.sb.byID["sbmine"].Status = api.StatusSucceeded
	e.sb.mu.Unlock()
	if code, _, body := e.do(t, "GET", "/health", "", HeaderAccessToken, "tok-mine"); code != 502 {
		t.Errorf("the token of an ended sandbox: %d %s, want 502", code, body)
	}
}
