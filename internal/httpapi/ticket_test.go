package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
)

// A terminal ticket opens its sandbox's WebSocket once, with the tenant
// of the key that asked for it; not twice, not another sandbox's, not
// after 30 s; and ?ticket= lets nothing else through.
func TestTerminalTicket(t *testing.T) {
	const key = "ticket-test-key-0123456789"
	keys, err := auth.NewKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var tenants []string
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/exec/interactive") {
				mu.Lock()
				tenants = append(tenants, auth.TenantOf(r.Context()))
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
	e := newEnv(t, envOptions{keys: keys, now: clock, opts: []Option{WithMiddleware(record)}})

	call := func(method, target, withKey string, upgrade bool) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, e.url+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json")
			req.Body = io.NopCloser(strings.NewReader(`{"image":"alpine"}`))
		}
		if withKey != "" {
			req.Header.Set("Authorization", "Bearer "+withKey)
		}
		if upgrade {
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	create := func() string {
		t.Helper()
		status, b := call("POST", "/api/v1/sandboxes", key, false)
		var sb api.Sandbox
		if status != http.StatusCreated || json.Unmarshal(b, &sb) != nil {
			t.Fatalf("create: %d %s", status, b)
		}
		return sb.ID
	}
	one, other := create(), create()
	ticket := func(id string) api.TerminalTicket {
		t.Helper()
		status, b := call("POST", "/api/v1/sandboxes/"+id+"/exec/interactive/ticket", key, false)
		var tk api.TerminalTicket
		if status != http.StatusCreated || json.Unmarshal(b, &tk) != nil {
			t.Fatalf("ticket: %d %s", status, b)
		}
		return tk
	}
	dialPath := func(p, tk string) int {
		t.Helper()
		conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.url, "http")+p+"ticket="+tk, nil)
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			return resp.StatusCode
		}
		defer conn.Close()
		var exit struct {
			Type     string `json:"type"`
			ExitCode *int   `json:"exitCode"`
		}
		if err := conn.ReadJSON(&exit); err != nil || exit.Type != "exit" || exit.ExitCode == nil || *exit.ExitCode != 0 {
			t.Fatalf("through a ticket: %+v, %v", exit, err)
		}
		return http.StatusSwitchingProtocols
	}
	dial := func(id, tk string) int {
		t.Helper()
		return dialPath("/api/v1/sandboxes/"+id+"/exec/interactive?command=true&tty=false&", tk)
	}

	if status, _ := call("POST", "/api/v1/sandboxes/"+one+"/exec/interactive/ticket", "", false); status != http.StatusUnauthorized {
		t.Errorf("a ticket without a key: %d", status)
	}
	if status, _ := call("POST", "/api/v1/sandboxes/nosuch/exec/interactive/ticket", key, false); status != http.StatusNotFound {
		t.Errorf("a ticket for no sandbox: %d", status)
	}

	tk := ticket(one)
	if len(tk.Ticket) != 43 || !tk.ExpiresAt.Equal(now.Add(30*time.Second)) {
		t.Errorf("ticket %+v, want 43 characters expiring at %s", tk, now.Add(30*time.Second))
	}
	// Requests other than the WebSocket upgrade of its sandbox's terminal
	// are not authenticated by it, and do not spend it.
	for _, tt := range []struct {
		method, target string
		upgrade        bool
	}{
		{"GET", "/api/v1/sandboxes/" + one + "?ticket=" + tk.Ticket, true},
		{"GET", "/api/v1/sandboxes?ticket=" + tk.Ticket, true},
		{"POST", "/api/v1/sandboxes/" + one + "/exec?ticket=" + tk.Ticket, true},
		{"POST", "/api/v1/sandboxes/" + one + "/exec/interactive/ticket?ticket=" + tk.Ticket, true},
		{"GET", "/api/v1/sandboxes/" + one + "/exec/interactive?command=true&ticket=" + tk.Ticket, false},
		{"GET", "/api/v1/sandboxes/" + one + "/exec/interactive/x?ticket=" + tk.Ticket, true},
		{"GET", "/api/v1/sandboxes/" + one + "/files?path=x&ticket=" + tk.Ticket, true},
	} {
		if status, b := call(tt.method, tt.target, "", tt.upgrade); status != http.StatusUnauthorized {
			t.Errorf("%s %s (upgrade %v) with a ticket: %d %s, want 401", tt.method, tt.target, tt.upgrade, status, b)
		}
	}
	// Spellings the mux would clean or decode into another route are not
	// taken for the terminal's path (served without the network, which
	// would clean them).
	for _, target := range []string{
		"/api/v1/sandboxes/" + one + "/exec/interactive/../../../" + one + "?ticket=" + tk.Ticket,
		"/api/v1/sandboxes/" + one + "%2Fexec/exec/interactive?ticket=" + tk.Ticket,
		"//api/v1/sandboxes/" + one + "/exec/interactive?ticket=" + tk.Ticket,
	} {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Connection", "Upgrade")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("GET %s with a ticket: %d %s, want 401", target, rec.Code, rec.Body)
		}
	}
	mu.Lock()
	tenants = nil
	mu.Unlock()
	if status := dial(one, tk.Ticket); status != http.StatusSwitchingProtocols {
		t.Fatalf("the ticket's first use: %d", status)
	}
	mu.Lock()
	if len(tenants) != 1 || tenants[0] != auth.Tenant(key) {
		t.Errorf("the ticket's request had tenants %q, want the key's %q", tenants, auth.Tenant(key))
	}
	mu.Unlock()
	if status := dial(one, tk.Ticket); status != http.StatusUnauthorized {
		t.Errorf("the ticket's second use: %d, want 401", status)
	}

	// A request refused for its sandbox or its parameters leaves the
	// ticket; the first that goes through spends it.
	tk = ticket(one)
	for _, tt := range []struct {
		what, path string
		want       int
	}{
		{"another sandbox", "/api/v1/sandboxes/" + other + "/exec/interactive?command=true&", http.StatusUnauthorized},
		{"no sandbox", "/api/v1/sandboxes/nosuch/exec/interactive?command=true&", http.StatusUnauthorized},
		{"rows -1", "/api/v1/sandboxes/" + one + "/exec/interactive?command=true&rows=-1&", http.StatusBadRequest},
		{"tty maybe", "/api/v1/sandboxes/" + one + "/exec/interactive?command=true&tty=maybe&", http.StatusBadRequest},
		{"env without =", "/api/v1/sandboxes/" + one + "/exec/interactive?command=true&env=A&", http.StatusBadRequest},
		{"attach: since not an offset", "/api/v1/sandboxes/" + one + "/terminals/web/attach?since=x&", http.StatusBadRequest},
	} {
		if status := dialPath(tt.path, tk.Ticket); status != tt.want {
			t.Errorf("a ticket on %s: %d, want %d", tt.what, status, tt.want)
		}
	}
	if status := dial(one, tk.Ticket); status != http.StatusSwitchingProtocols {
		t.Errorf("a ticket after refused requests: %d, want it still good", status)
	}
	if status := dial(one, tk.Ticket); status != http.StatusUnauthorized {
		t.Errorf("the ticket's second use after refused requests: %d, want 401", status)
	}

	// A persistent terminal's attachment takes a ticket too; its other
	// routes do not.
	req, _ := http.NewRequest("POST", e.url+"/api/v1/sandboxes/"+one+"/terminals", strings.NewReader(`{"name":"web","command":["sleep","60"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a terminal: %v %v", resp, err)
	}
	tk = ticket(one)
	if status, b := call("GET", "/api/v1/sandboxes/"+one+"/terminals/web?ticket="+tk.Ticket, "", true); status != http.StatusUnauthorized {
		t.Errorf("a terminal's info with a ticket: %d %s, want 401", status, b)
	}
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + one + "/terminals/web/attach?readonly=true&ticket=" + tk.Ticket
	if conn, resp, err := websocket.DefaultDialer.Dial(u, nil); err != nil {
		t.Errorf("a terminal's attachment with a ticket: %v %v", resp, err)
	} else {
		conn.Close()
	}

	after := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	// Expiry.
	for age, want := range map[time.Duration]int{29 * time.Second: http.StatusSwitchingProtocols, 30 * time.Second: http.StatusUnauthorized} {
		tk = ticket(one)
		after(age)
		if status := dial(one, tk.Ticket); status != want {
			t.Errorf("a ticket at %s: %d, want %d", age, status, want)
		}
	}
	if status := dial(one, "nonsense"); status != http.StatusUnauthorized {
		t.Errorf("a made-up ticket: %d, want 401", status)
	}

	// At most 1,000 live; expired ones make room.
	for range 1000 {
		ticket(one)
	}
	if status, b := call("POST", "/api/v1/sandboxes/"+one+"/exec/interactive/ticket", key, false); status != http.StatusServiceUnavailable {
		t.Errorf("the 1,001st live ticket: %d %s, want 503", status, b)
	}
	after(30 * time.Second)
	if status := dial(one, ticket(one).Ticket); status != http.StatusSwitchingProtocols {
		t.Errorf("a ticket once the others expired: %d", status)
	}
}
