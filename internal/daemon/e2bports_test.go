package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
)

// doHost sends a request to daemon d with Host host (none: d's address)
// and headers (name, value, …), and returns its answer's status, headers
// and body.
func doHost(t *testing.T, d *testDaemon, method, host, path, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

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
				headers := []string{"X-API-KEY", key}
				if body != "" {
					headers = append(headers, "Content-Type", "application/json")
				}
				code, _, b := doHost(t, d, method, host, path, body, headers...)
				return code, b
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
			if want := map[bool]int{false: http.StatusBadGateway, true: http.StatusForbidden}[private]; code != want {
				t.Errorf("the port without a token: %d %s, want %d", code, body, want)
			}
			// A page on another origin that sends the sandbox's token is
			// preflighted first, without it, as Chrome does: the daemon
			// answers it, public or private, allowing the token's header;
			// nothing reaches the sandbox. So it does for the gateway's
			// own paths (a sandbox's accessUrl, an OpenSandbox endpoint),
			// whose token is X-Access-Token.
			for _, pf := range []struct{ host, path, header string }{
				{"3000-" + sb.SandboxID + ".localhost", "/api/data", "e2b-traffic-access-token"},
				{"", "/api/v1/sandbox/" + sb.SandboxID + "/port/3000/api/data", "x-access-token"},
			} {
				code, h, body := doHost(t, d, "OPTIONS", pf.host, pf.path, "",
					"Origin", "http://app.localhost:5173",
					"Access-Control-Request-Method", "POST",
					"Access-Control-Request-Headers", "content-type,"+pf.header,
					"Sec-Fetch-Mode", "cors", "Sec-Fetch-Site", "same-site", "Sec-Fetch-Dest", "empty")
				if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" ||
					!strings.Contains(h.Get("Access-Control-Allow-Headers"), pf.header) ||
					!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
					t.Errorf("preflight to %s%s: %d %v %s, want 204 allowing POST with %s", pf.host, pf.path, code, h, body, pf.header)
				}
			}
		})
	}
}

// readCounter counts the store's reads of each sandbox.
type readCounter struct {
	recordStore
	mu    sync.Mutex
	reads map[string]int
}

func (c *readCounter) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.recordStore.GetSandbox(ctx, id)
}

func (c *readCounter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[id]
}

// A request to a sandbox's user port at <port>-<id>.<domain> reads the
// sandbox from the store once, public or private: the E2B API checks
// access on what it read, and the gateway does not check it again (it
// read the sandbox three times per request to a public port, twice to a
// private one).
func TestE2BPortStoreReads(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the sandbox "+r.URL.Path)
	}))
	defer backend.Close()
	port := backend.Listener.Addr().(*net.TCPAddr).Port

	counter := &readCounter{reads: map[string]int{}}
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	key, _ := twoKeys(t, &cfg)
	cfg.wrapStore = func(s recordStore) recordStore { counter.recordStore = s; return counter }
	d := start(t, cfg, nil)
	d.importTiny()
	do := func(method, host, path, body string, headers ...string) (int, string) {
		t.Helper()
		code, _, b := doHost(t, d, method, host, path, body, headers...)
		return code, b
	}
	for _, tc := range []struct {
		name, network string
		token         bool
	}{
		{"public", `{}`, false},
		{"private", `{"allowPublicTraffic":false}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do("POST", "", "/sandboxes", `{"templateID":"`+tinyRef+`","network":`+tc.network+`}`,
				"X-API-KEY", key, "Content-Type", "application/json")
			var sb struct {
				SandboxID          string `json:"sandboxID"`
				TrafficAccessToken string `json:"trafficAccessToken"`
			}
			if err := json.Unmarshal([]byte(body), &sb); err != nil || code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, body)
			}
			var headers []string
			if tc.token {
				headers = []string{"E2B-Traffic-Access-Token", sb.TrafficAccessToken}
			}
			host := strconv.Itoa(port) + "-" + sb.SandboxID + ".localhost"
			// The first request also dials the port (a read of its own);
			// the next ones reuse the connection.
			if code, body := do("GET", host, "/warm", "", headers...); code != 200 {
				t.Fatalf("first request: %d %s", code, body)
			}
			const n = 10
			before := counter.count(sb.SandboxID)
			for i := range n {
				if code, body := do("GET", host, "/x", "", headers...); code != 200 || body != "from the sandbox /x" {
					t.Fatalf("request %d: %d %s", i, code, body)
				}
			}
			if reads := counter.count(sb.SandboxID) - before; reads != n {
				t.Errorf("%d requests read the sandbox %d times, want %d", n, reads, n)
			}
		})
	}
}
