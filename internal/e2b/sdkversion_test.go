package e2b

import (
	"strings"
	"testing"
)

func TestSendsInternetByDefault(t *testing.T) {
	for _, tc := range []struct {
		userAgent string
		want      bool
	}{
		{"e2b-python-sdk/2.7.0", true},
		{"e2b-js-sdk/2.28.0", true},
		{"e2b-python-sdk/2.50.0", true},
		{"e2b-js-sdk/2.50.9-beta.1", true},
		{"e2b-python-sdk/2.51.0", false},
		{"e2b-js-sdk/2.51.0", false},
		{"e2b-python-sdk/3.0.0", false},
		{"e2b-python-sdk/2.7", false},
		{"e2b-python-sdk/x.y.z", false},
		{"python-httpx/0.28.1", false},
		{"", false},
	} {
		if got := sendsInternetByDefault(tc.userAgent); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.userAgent, got, tc.want)
		}
	}
}

// TestCreateOldSDKInternetDefault: an SDK older than 2.51 sends
// allow_internet_access: true unasked; it creates the sandbox, as from a
// newer SDK that leaves the field out. From a newer SDK, true is refused.
func TestCreateOldSDKInternetDefault(t *testing.T) {
	e := newEnv(t)
	body := `{"templateID":"base","allow_internet_access":true}`
	for _, tc := range []struct {
		userAgent string
		want      int
	}{
		{"e2b-python-sdk/2.7.0", 201},
		{"e2b-js-sdk/2.28.0", 201},
		{"e2b-python-sdk/2.63.0", 400},
		{"curl/8", 400},
	} {
		code, _, got := e.do(t, "POST", "/sandboxes", body, HeaderAPIKey, goodKey, "User-Agent", tc.userAgent)
		if code != tc.want || (code == 400 && !strings.Contains(got, "allow_internet_access")) {
			t.Errorf("%s: %d %s, want %d", tc.userAgent, code, got, tc.want)
		}
	}
	// And with a template, where any allow_internet_access is refused.
	code, _, got := e.do(t, "POST", "/sandboxes", `{"templateID":"mytpl","allow_internet_access":true}`, HeaderAPIKey, goodKey, "User-Agent", "e2b-python-sdk/2.26.0")
	if code != 201 {
		t.Errorf("a template from an old SDK: %d %s, want 201", code, got)
	}
}
