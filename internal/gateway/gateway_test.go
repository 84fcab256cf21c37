package gateway

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeSandboxes is a hand-written Sandboxes: each sandbox has a token, a
// running flag and its ports, which map to loopback listeners. lookups
// counts the access checks.
type fakeSandboxes struct {
	mu      sync.Mutex
	boxes   map[string]*fakeBox
	lookups atomic.Int64
	dials   atomic.Int64
}

type fakeBox struct {
	token   string
	running bool
	ports   map[int]string // port -> listener address
	// dialErr is Dial's answer when set: the sandbox went away or
	// stopped after the access check.
	dialErr error
}

// Authorize answers as service.Sandboxes does, in its order: tokens are
// compared plainly (service's tests cover the comparison).
func (f *fakeSandboxes) Authorize(ctx context.Context, id, token string) error {
	f.lookups.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boxes[id]
	switch {
	case token == "":
		return fmt.Errorf("missing access token: %w", errdefs.ErrUnauthenticated)
	case b == nil:
		return errdefs.WithCode(errdefs.NotFound("sandbox not found"), api.CodeSandboxNotFound)
	case token != b.token:
		return fmt.Errorf("invalid access token: %w", errdefs.ErrUnauthenticated)
	case !b.running:
		return errdefs.WithCode(errdefs.Precondition("sandbox %s is not running", id), api.CodeSandboxNotReady)
	}
	return nil
}

func (f *fakeSandboxes) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	f.dials.Add(1)
	f.mu.Lock()
	b := f.boxes[id]
	f.mu.Unlock()
	if b == nil {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if b.dialErr != nil {
		return nil, b.dialErr
	}
	addr, ok := b.ports[port]
	if !ok {
		return nil, fmt.Errorf("dial 127.0.0.1:%d: connection refused: %w", port, errdefs.ErrUnavailable)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

const (
	tokenA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// echo answers with what it received, as JSON.
type echoed struct {
	Method, URI, Host, Body, Who string
	Header                       http.Header
}

func echoBackend(t *testing.T, who string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			websocketEcho(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		json.NewEncoder(w).Encode(echoed{Method: r.Method, URI: r.RequestURI, Host: r.Host, Body: string(b), Who: who, Header: r.Header})
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func setup(t *testing.T) (*fakeSandboxes, string) {
	t.Helper()
	f := &fakeSandboxes{boxes: map[string]*fakeBox{
		"sba":     {token: tokenA, running: true, ports: map[int]string{8080: echoBackend(t, "a")}},
		"sbb":     {token: tokenB, running: true, ports: map[int]string{8080: echoBackend(t, "b")}},
		"stopped": {token: tokenA, running: false, ports: map[int]string{8080: echoBackend(t, "stopped")}},
	}}
	g := New(f, nil)
	t.Cleanup(g.Close)
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func do(t *testing.T, method, url, token string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestChecks(t *testing.T) {
	f, base := setup(t)
	tests := []struct {
		name   string
		path   string
		token  string
		status int
		code   string
		msg    string
	}{
		{"missing token", "/api/v1/sandbox/sba/port/8080/", "", 401, api.CodeUnauthorized, "missing access token"},
		{"wrong token", "/api/v1/sandbox/sba/port/8080/", tokenB, 401, api.CodeUnauthorized, "invalid access token"},
		{"another sandbox's token", "/api/v1/sandbox/sbb/port/8080/", tokenA, 401, api.CodeUnauthorized, "invalid access token"},
		{"unknown sandbox", "/api/v1/sandbox/nosuch/port/8080/", tokenA, 404, api.CodeSandboxNotFound, "sandbox not found"},
		{"not running", "/api/v1/sandbox/stopped/port/8080/", tokenA, 409, api.CodeSandboxNotReady, "not running"},
		{"port not a number", "/api/v1/sandbox/sba/port/http/", tokenA, 400, api.CodeInvalidRequest, "invalid port number"},
		{"port zero", "/api/v1/sandbox/sba/port/0/", tokenA, 400, api.CodeInvalidRequest, "invalid port number"},
		{"port too big", "/api/v1/sandbox/sba/port/65536/", tokenA, 400, api.CodeInvalidRequest, "invalid port number"},
		{"closed port", "/api/v1/sandbox/sba/port/9999/", tokenA, 502, api.CodeUnavailable, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dials := f.dials.Load()
			resp, b := do(t, "GET", base+tt.path, tt.token, nil)
			var e api.Error
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("body %q is not the error body: %v", b, err)
			}
			if resp.StatusCode != tt.status || e.Code != tt.code || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("GET %s = %d %+v, want %d %s containing %q", tt.path, resp.StatusCode, e, tt.status, tt.code, tt.msg)
			}
			if tt.status != 502 && f.dials.Load() != dials {
				t.Error("a refused request dialed the sandbox")
			}
		})
	}
}

// A sandbox that goes away or stops between the access check and the dial
// is answered with Dial's error as it is, not as a proxy failure.
func TestDialRefusals(t *testing.T) {
	f, base := setup(t)
	f.mu.Lock()
	f.boxes["vanishing"] = &fakeBox{token: tokenA, running: true,
		dialErr: errdefs.WithCode(errdefs.NotFound("sandbox not found"), api.CodeSandboxNotFound)}
	f.boxes["stopping"] = &fakeBox{token: tokenA, running: true,
		dialErr: errdefs.WithCode(errdefs.Precondition("sandbox stopping is stopped, not running"), api.CodeSandboxNotReady)}
	f.mu.Unlock()
	tests := []struct {
		id     string
		status int
		want   api.Error
	}{
		{"vanishing", 404, api.Error{Message: "sandbox not found", Code: api.CodeSandboxNotFound}},
		{"stopping", 409, api.Error{Message: "sandbox stopping is stopped, not running", Code: api.CodeSandboxNotReady}},
	}
	for _, tt := range tests {
		resp, b := do(t, "GET", base+"/api/v1/sandbox/"+tt.id+"/port/8080/", tokenA, nil)
		var got api.Error
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("body %q is not the error body: %v", b, err)
		}
		if resp.StatusCode != tt.status || got.Message != tt.want.Message || got.Code != tt.want.Code {
			t.Errorf("GET port of %s = %d %+v, want %d %+v", tt.id, resp.StatusCode, got, tt.status, tt.want)
		}
	}
}

func TestForwardHTTP(t *testing.T) {
	_, base := setup(t)
	tests := []struct {
		name, method, path, body string
		wantURI                  string
	}{
		{"root without slash", "GET", "/api/v1/sandbox/sba/port/8080", "", "/"},
		{"root", "GET", "/api/v1/sandbox/sba/port/8080/", "", "/"},
		{"path and query", "GET", "/api/v1/sandbox/sba/port/8080/a/b?x=1&y=%20", "", "/a/b?x=1&y=%20"},
		{"escaped slash kept", "GET", "/api/v1/sandbox/sba/port/8080/files/a%2Fb", "", "/files/a%2Fb"},
		{"post body", "POST", "/api/v1/sandbox/sba/port/8080/submit", "payload", "/submit"},
		{"put", "PUT", "/api/v1/sandbox/sba/port/8080/x", "p", "/x"},
		{"delete", "DELETE", "/api/v1/sandbox/sba/port/8080/x", "", "/x"},
		{"patch", "PATCH", "/api/v1/sandbox/sba/port/8080/x", "p", "/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			resp, b := do(t, tt.method, base+tt.path, tokenA, body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s %s = %d %s", tt.method, tt.path, resp.StatusCode, b)
			}
			var got echoed
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Who != "a" || got.Method != tt.method || got.URI != tt.wantURI || got.Body != tt.body {
				t.Errorf("backend saw %s %s %q at %s, want %s %s %q at a", got.Method, got.URI, got.Body, got.Who, tt.method, tt.wantURI, tt.body)
			}
			if v := got.Header.Get(TokenHeader); v != "" {
				t.Errorf("the access token reached the sandbox: %q", v)
			}
			if got.Host != strings.TrimPrefix(base, "http://") {
				t.Errorf("backend Host = %q, want the gateway's", got.Host)
			}
			if p := got.Header.Get("X-Forwarded-Prefix"); p != "/api/v1/sandbox/sba/port/8080" {
				t.Errorf("X-Forwarded-Prefix = %q", p)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("no CORS header on the answer")
			}
		})
	}
}

// Pooled connections never cross sandboxes: the same port of two
// sandboxes reaches two servers, one request after another.
func TestSandboxesKeptApart(t *testing.T) {
	_, base := setup(t)
	for i := range 6 {
		id, token, who := "sba", tokenA, "a"
		if i%2 == 1 {
			id, token, who = "sbb", tokenB, "b"
		}
		resp, b := do(t, "GET", base+"/api/v1/sandbox/"+id+"/port/8080/", token, nil)
		var got echoed
		json.Unmarshal(b, &got)
		if resp.StatusCode != 200 || got.Who != who {
			t.Fatalf("request %d to %s answered by %q (%d)", i, id, got.Who, resp.StatusCode)
		}
	}
}

func TestPreflight(t *testing.T) {
	f, base := setup(t)
	req, _ := http.NewRequest("OPTIONS", base+"/api/v1/sandbox/sba/port/8080/x", nil)
	req.Header.Set("Origin", "http://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "x-access-token, content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "x-access-token") {
		t.Errorf("preflight = %d %v", resp.StatusCode, resp.Header)
	}
	if f.lookups.Load() != 0 || f.dials.Load() != 0 {
		t.Error("a preflight looked up or dialed the sandbox")
	}
}

// TestForward checks the entry of surfaces that check access themselves:
// the request reaches the port with its own path and query, checked by no
// lookup, and without the access token or a forwarded prefix (the
// client's paths are the server's own).
func TestForward(t *testing.T) {
	f := &fakeSandboxes{boxes: map[string]*fakeBox{
		"sba": {token: tokenA, running: true, ports: map[int]string{3000: echoBackend(t, "a")}},
	}}
	g := New(f, nil)
	t.Cleanup(g.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.Forward(w, r, "sba", 3000)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ method, path, wantURI string }{
		{"GET", "/", "/"},
		{"GET", "/app.js?v=1&x=%2F", "/app.js?v=1&x=%2F"},
		{"POST", "/a%2Fb/c", "/a%2Fb/c"},
		{"GET", "/api/v1/sandbox/sbb/port/8080/x", "/api/v1/sandbox/sbb/port/8080/x"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(TokenHeader, tokenA)
			req.Header.Set("X-Forwarded-Prefix", "/spoofed")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got echoed
			if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if got.Who != "a" || got.Method != tc.method || got.URI != tc.wantURI {
				t.Errorf("backend saw %s %s at %s, want %s %s at a", got.Method, got.URI, got.Who, tc.method, tc.wantURI)
			}
			if v, p := got.Header.Get(TokenHeader), got.Header.Get("X-Forwarded-Prefix"); v != "" || p != "" {
				t.Errorf("the sandbox saw token %q and prefix %q, want neither", v, p)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("no CORS header on the answer")
			}
		})
	}
	if n := f.lookups.Load(); n != 0 {
		t.Errorf("Forward checked access %d times, want 0: its caller has", n)
	}
}

const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + websocketGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// websocketEcho is a minimal WebSocket server: it answers the handshake,
// then echoes each text frame (masked, short) prefixed with "echo: ".
func websocketEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || r.Header.Get("X-Access-Token") != "" {
		http.Error(w, "bad upgrade", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		acceptKey(r.Header.Get("Sec-WebSocket-Key")))
	brw.Flush()
	for {
		msg, err := readFrame(brw.Reader)
		if err != nil {
			return
		}
		if _, err := conn.Write(frame([]byte("echo: "+string(msg)), nil)); err != nil {
			return
		}
	}
}

// frame encodes a short final text frame, masked when mask is given.
func frame(p, mask []byte) []byte {
	b := []byte{0x81, byte(len(p))}
	if mask != nil {
		b[1] |= 0x80
		b = append(b, mask...)
		for i, c := range p {
			b = append(b, c^mask[i%4])
		}
		return b
	}
	return append(b, p...)
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[1] & 0x7f)
	if n > 125 {
		return nil, errors.New("long frames not supported by the test")
	}
	var mask []byte
	if hdr[1]&0x80 != 0 {
		mask = make([]byte, 4)
		if _, err := io.ReadFull(r, mask); err != nil {
			return nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	for i := range p {
		if mask != nil {
			p[i] ^= mask[i%4]
		}
	}
	return p, nil
}

func TestWebSocket(t *testing.T) {
	_, base := setup(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	fmt.Fprintf(c, "GET /api/v1/sandbox/sba/port/8080/ws HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s: %s\r\n\r\n", key, TokenHeader, tokenA)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(key) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("handshake = %s %v %s", resp.Status, resp.Header, b)
	}
	mask := []byte{1, 2, 3, 4}
	for _, msg := range []string{"hello", "world", strings.Repeat("z", 100)} {
		if _, err := c.Write(frame([]byte(msg), mask)); err != nil {
			t.Fatal(err)
		}
		got, err := readFrame(br)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("frame = %q, %v; want echo of %q", got, err, msg)
		}
	}
}

// An upgrade without the token is refused before the sandbox is reached.
func TestWebSocketNeedsToken(t *testing.T) {
	f, base := setup(t)
	req, _ := http.NewRequest("GET", base+"/api/v1/sandbox/sba/port/8080/ws", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || f.dials.Load() != 0 {
		t.Errorf("upgrade without token = %d, dials %d", resp.StatusCode, f.dials.Load())
	}
}

// The gateway serves the accessUrl the service gives sandboxes.
func TestPrefix(t *testing.T) {
	if Prefix != service.GatewayPrefix {
		t.Errorf("Prefix = %q, service.GatewayPrefix = %q", Prefix, service.GatewayPrefix)
	}
}
