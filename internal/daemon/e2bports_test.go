package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// A sandbox the E2B API makes has its user ports public at
// <port>-<id>.<domain>, as E2B's are, unless the daemon keeps every port
// private (--private-ports): then they want its token, and its details
// say so.
func TestE2BPrivatePorts(t *testing.T) {
	for _, private := range []bool{false, true} {
		t.Run(map[bool]string{false: "public", true: "private"}[private], func(t *testing.T) {
			cfg := testConfig(t.TempDir(), fakeruntime.New())
			key, _ := twoKeys(t, &cfg)
			cfg.PrivatePorts = private
			d := start(t, cfg, nil)
			d.importTiny()
			do := func(method, host, path, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequest(method, "http://"+d.addr+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if host != "" {
					req.Host = host
				}
				req.Header.Set("X-API-KEY", key)
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(raw)
			}
			code, body := do("POST", "", "/sandboxes", `{"templateID":"`+tinyRef+`"}`)
			var sb struct {
				SandboxID string `json:"sandboxID"`
			}
			if err := json.Unmarshal([]byte(body), &sb); err != nil || code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, body)
			}
			code, body = do("GET", "", "/sandboxes/"+sb.SandboxID, "")
			if want := `"allowPublicTraffic":` + map[bool]string{false: "true", true: "false"}[private]; code != 200 || !strings.Contains(body, want) {
				t.Errorf("get: %d %s, want %s", code, body, want)
			}
			// No token: refused on a private daemon; on another, past the
			// token check to the port, which nothing serves here.
			code, body = do("GET", "3000-"+sb.SandboxID+".localhost", "/", "")
			if want := map[bool]int{false: http.StatusBadGateway, true: http.StatusUnauthorized}[private]; code != want {
				t.Errorf("the port without a token: %d %s, want %d", code, body, want)
			}
		})
	}
}
