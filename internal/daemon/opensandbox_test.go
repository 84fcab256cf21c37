package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// The OpenSandbox API is mounted on the daemon's port: on /v1/ with its
// own key header and error bodies (not the Bearer check), on
// /opensandbox/ by sandbox token, inside the Host refusal.
func TestOpenSandboxMounted(t *testing.T) {
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	key, _ := twoKeys(t, &cfg)
	d := start(t, cfg, nil)
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		wantStatus         int
		wantCode           string // "": a body that is not an error
	}{
		{"list with the OpenSandbox key", "GET", "/v1/sandboxes", map[string]string{"OPEN-SANDBOX-API-KEY": key}, 200, ""},
		{"no key", "GET", "/v1/sandboxes", nil, 401, "MISSING_API_KEY"},
		{"wrong key", "GET", "/v1/sandboxes", map[string]string{"OPEN-SANDBOX-API-KEY": "a2e_wrong-0123456789"}, 401, "INVALID_API_KEY"},
		{"a Bearer key is not the OpenSandbox header", "GET", "/v1/sandboxes", map[string]string{"Authorization": "Bearer " + key}, 401, "MISSING_API_KEY"},
		{"unknown path under /v1", "GET", "/v1/nothing", map[string]string{"OPEN-SANDBOX-API-KEY": key}, 404, "NOT_FOUND"},
		{"unknown sandbox", "GET", "/v1/sandboxes/nope", map[string]string{"OPEN-SANDBOX-API-KEY": key}, 404, "SANDBOX_NOT_FOUND"},
		{"execd without a token", "GET", "/opensandbox/nope/execd/ping", nil, 401, "UNAUTHORIZED"},
		{"execd of an unknown sandbox", "GET", "/opensandbox/nope/execd/ping", map[string]string{"X-Access-Token": "t"}, 404, "SANDBOX_NOT_FOUND"},
		{"a foreign Host", "GET", "/v1/sandboxes", map[string]string{"OPEN-SANDBOX-API-KEY": key, "Host": "evil.example"}, http.StatusMisdirectedRequest, "MISDIRECTED_REQUEST"},
		{"the REST API still wants Bearer", "GET", "/api/v1/sandboxes", map[string]string{"OPEN-SANDBOX-API-KEY": key}, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://"+d.addr+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, raw, tc.wantStatus)
			}
			if tc.wantCode == "" {
				return
			}
			var eb map[string]any
			err = json.Unmarshal(raw, &eb)
			if msg, _ := eb["message"].(string); err != nil || eb["code"] != tc.wantCode || msg == "" || len(eb) != 2 {
				t.Errorf("body %s, want {code: %s, message}", raw, tc.wantCode)
			}
		})
	}
}

// The E2B API is mounted ahead of the daemon's routes: its errors, and the
// daemon's refusal of a foreign Host, are E2B's {code: status, message}.
func TestE2BMounted(t *testing.T) {
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	twoKeys(t, &cfg)
	d := start(t, cfg, nil)
	for _, tc := range []struct {
		name, host string
		status     int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"a foreign Host", "evil.example", http.StatusMisdirectedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", "http://"+d.addr+"/v2/sandboxes", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var eb map[string]any
			err = json.Unmarshal(raw, &eb)
			if msg, _ := eb["message"].(string); resp.StatusCode != tc.status || err != nil || eb["code"] != float64(tc.status) ||
				msg == "" || len(eb) != 2 {
				t.Errorf("%d %s, want %d {code: %d, message}", resp.StatusCode, raw, tc.status, tc.status)
			}
		})
	}
}

func TestPublicHost(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":              "127.0.0.1:8080",
		"https://sandbox.example.com/":       "sandbox.example.com",
		"https://sandbox.example.com/a2e/":   "sandbox.example.com/a2e",
		"http://0.0.0.0:8080":                "",
		"http://[::]:8080":                   "",
		"http://:8080":                       "",
		"":                                   "",
		"::not a url":                        "",
		"http://sandbox.example.com:9000/x/": "sandbox.example.com:9000/x",
	} {
		if got := publicHost(in); got != want {
			t.Errorf("publicHost(%q) = %q, want %q", in, got, want)
		}
	}
}
