package e2b

import (
	"fmt"
	"sync"
	"testing"
	"time"

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

// TestTokenUnknownScansBounded: requests with unknown tokens, however
// many, cost at most one scan of the live sandboxes per rescanEvery, not
// one each, and each still answers 502.
func TestTokenUnknownScansBounded(t *testing.T) {
	e := newEnv(t, running("sba", nil), running("sbb", nil), running("sbc", nil))
	const n = 64
	begin := time.Now()
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _ := e.do(t, "GET", "/health", "", HeaderAccessToken, fmt.Sprintf("tok-unknown-%d", i))
			codes <- code
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 502 {
			t.Errorf("an unknown token: %d, want 502", code)
		}
	}
	scans := e.h.tokens.scans.Load()
	if most := int64(time.Since(begin)/rescanEvery) + 2; scans > most {
		t.Errorf("%d requests with unknown tokens made %d scans in %v, want at most %d", n, scans, time.Since(begin), most)
	}
	t.Logf("%d unknown-token requests: %d scans in %v", n, scans, time.Since(begin))
}

// TestTokenAfterCreate: the token of a sandbox just made works at once:
// handed out by the surface, without a scan; made behind its back (by
// another surface or replica), found by the next scan even right after
// one.
func TestTokenAfterCreate(t *testing.T) {
	e := newEnv(t)
	if code, _, body := e.api(t, "POST", "/sandboxes", `{"templateID":"base"}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, _, body := e.do(t, "GET", "/health", "", HeaderAccessToken, token); code != 204 {
		t.Errorf("the new sandbox's token: %d %s, want 204", code, body)
	}
	if scans := e.h.tokens.scans.Load(); scans != 0 {
		t.Errorf("a token handed out by create took %d scans, want 0", scans)
	}
	// A scan now (an unknown token), then a sandbox made elsewhere.
	if code, _, _ := e.do(t, "GET", "/health", "", HeaderAccessToken, "tok-unknown"); code != 502 {
		t.Errorf("an unknown token: %d, want 502", code)
	}
	other := running("sbother", nil)
	other.AccessToken = "tok-other"
	e.sb.mu.Lock()
	e.sb.byID[other.ID] = &other
	e.sb.order = append(e.sb.order, other.ID)
	e.sb.mu.Unlock()
	if code, _, body := e.do(t, "GET", "/health", "", HeaderAccessToken, "tok-other"); code != 204 {
		t.Errorf("the token of a sandbox made right after a scan: %d %s, want 204", code, body)
	}
}
