package netproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPolicy(t *testing.T) {
	tests := []struct {
		name    string
		policy  Policy
		host    string
		allowed bool
	}{
		{"zero value allows nothing", Policy{}, "example.com", false},
		{"exact", Policy{Domains: []string{"example.com"}}, "example.com", true},
		{"exact is not a suffix", Policy{Domains: []string{"example.com"}}, "api.example.com", false},
		{"exact is not a prefix", Policy{Domains: []string{"example.com"}}, "example.com.evil.net", false},
		{"label boundary", Policy{Domains: []string{"*.example.com"}}, "badexample.com", false},
		{"wildcard subdomain", Policy{Domains: []string{"*.example.com"}}, "api.example.com", true},
		{"wildcard deep subdomain", Policy{Domains: []string{"*.example.com"}}, "a.b.example.com", true},
		{"wildcard not apex", Policy{Domains: []string{"*.example.com"}}, "example.com", false},
		{"request case", Policy{Domains: []string{"example.com"}}, "ExAmPle.COM", true},
		{"entry case", Policy{Domains: []string{"*.Example.COM"}}, "api.example.com", true},
		{"request trailing dot", Policy{Domains: []string{"example.com"}}, "example.com.", true},
		{"entry trailing dot", Policy{Domains: []string{" example.com. "}}, "example.com", true},
		{"wildcard trailing dot", Policy{Domains: []string{"*.example.com"}}, "api.example.com.", true},
		{"ip not allowed by name", Policy{Domains: []string{"example.com"}}, "93.184.216.34", false},
		{"ip not matched by wildcard", Policy{Domains: []string{"*.34"}}, "93.184.216.34", false},
		{"ip listed", Policy{Domains: []string{"93.184.216.34"}}, "93.184.216.34", true},
		{"other ip", Policy{Domains: []string{"93.184.216.34"}}, "93.184.216.35", false},
		{"ipv6 listed", Policy{Domains: []string{"2001:db8::1"}}, "2001:db8:0::1", true},
		{"ipv6 bracketed", Policy{Domains: []string{"[2001:db8::1]"}}, "[2001:db8::1]", true},
		{"ipv4-mapped", Policy{Domains: []string{"93.184.216.34"}}, "::ffff:93.184.216.34", true},
		{"zoned ip", Policy{Domains: []string{"fe80::1"}}, "fe80::1%eth0", false},
		{"bare star is not all", Policy{Domains: []string{"*"}}, "example.com", false},
		{"malformed entry", Policy{Domains: []string{"http://example.com/"}}, "example.com", false},
		{"entry with port", Policy{Domains: []string{"example.com:443"}}, "example.com", false},
		{"empty host", Policy{Domains: []string{"example.com"}}, "", false},
		{"invalid host", Policy{AllowAll: true}, "exa mple.com", false},
		{"allow all name", Policy{AllowAll: true}, "anything.example", true},
		{"allow all ip", Policy{AllowAll: true}, "203.0.113.9", true},
		{"allow all with list", Policy{AllowAll: true, Domains: []string{"example.com"}}, "other.org", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Allows(tt.host); got != tt.allowed {
				t.Errorf("%+v.Allows(%q) = %v, want %v", tt.policy, tt.host, got, tt.allowed)
			}
		})
	}
}

// upstreams maps test host names to loopback listeners and counts dials.
type upstreams struct {
	hosts map[string]string // "name:port" -> listener address
	dials atomic.Int64
}

func (u *upstreams) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	u.dials.Add(1)
	target, ok := u.hosts[addr]
	if !ok {
		return nil, fmt.Errorf("no test upstream for %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, target)
}

// serve runs a proxy with policy on a fresh loopback listener and returns
// its URL. Cancelling the returned func stops it and waits for Serve.
func serve(t *testing.T, cfg Config, policy Policy) (*url.URL, func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cfg).Serve(ctx, l, policy) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(5 * time.Second):
				buf := make([]byte, 1<<20)
				t.Errorf("Serve did not return after cancel\n%s", buf[:runtime.Stack(buf, true)])
			}
		})
	}
	t.Cleanup(stop)
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, stop
}

func proxyClient(t *testing.T, proxy *url.URL) *http.Client {
	tr := &http.Transport{
		Proxy:           http.ProxyURL(proxy),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func hostOf(s *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://")
}

func TestForward(t *testing.T) {
	var seen atomic.Pointer[http.Request]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Clone(context.Background()))
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), b)
	}))
	defer up.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure %s", r.URL.Path)
	}))
	defer tls.Close()
	u := &upstreams{hosts: map[string]string{
		"allowed.test:80":      hostOf(up),
		"api.wild.test:80":     hostOf(up),
		"secure.test:443":      hostOf(tls),
		"denied.test:80":       hostOf(up),
		"denied.test:443":      hostOf(tls),
		"93.184.216.34:80":     hostOf(up),
		"allowed.test:8080":    hostOf(up),
		"wild.test:80":         hostOf(up),
		"secure.wild.test:443": hostOf(tls),
	}}
	proxy, _ := serve(t, Config{DialContext: u.dial}, Policy{Domains: []string{"allowed.test", "secure.test", "*.wild.test", "93.184.216.34"}})
	c := proxyClient(t, proxy)

	tests := []struct {
		name     string
		method   string
		url      string
		status   int
		body     string
		noUpDial bool
	}{
		{"http", "GET", "http://allowed.test/a/b?q=1", 200, "GET /a/b?q=1 ", false},
		{"http post", "POST", "http://ALLOWED.test./p", 200, "POST /p payload", false},
		{"http other port", "GET", "http://allowed.test:8080/", 200, "GET / ", false},
		{"wildcard", "GET", "http://api.wild.test/", 200, "GET / ", false},
		{"ip literal listed", "GET", "http://93.184.216.34/", 200, "GET / ", false},
		{"https via connect", "GET", "https://secure.test/x", 200, "secure /x", false},
		{"https wildcard", "GET", "https://secure.wild.test/y", 200, "secure /y", false},
		{"http denied", "GET", "http://denied.test/", 403, "denied", true},
		{"wildcard apex denied", "GET", "http://wild.test/", 403, "denied", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := u.dials.Load()
			var body io.Reader
			if tt.method == "POST" {
				body = strings.NewReader("payload")
			}
			req, _ := http.NewRequest(tt.method, tt.url, body)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.body) {
				t.Errorf("%s %s = %d %q, want %d containing %q", tt.method, tt.url, resp.StatusCode, b, tt.status, tt.body)
			}
			if tt.noUpDial && u.dials.Load() != before {
				t.Errorf("a denied request dialed upstream")
			}
		})
	}
	// A denied CONNECT: the client sees the proxy's refusal.
	before := u.dials.Load()
	if _, err := c.Get("https://denied.test/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("https to a denied host: err = %v, want Forbidden", err)
	}
	if u.dials.Load() != before {
		t.Error("a denied CONNECT dialed upstream")
	}

	// What the upstream saw: the target's Host, no proxy headers, nothing
	// added about the client.
	req, _ := http.NewRequest("GET", "http://allowed.test/h", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Connection", "keep-alive")
	req.Header.Set("X-Custom", "kept")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := seen.Load()
	if r.Host != "allowed.test" {
		t.Errorf("upstream Host = %q, want allowed.test", r.Host)
	}
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Forwarded-For"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("upstream got %s: %q", h, v)
		}
	}
	if r.Header.Get("X-Custom") != "kept" {
		t.Errorf("end-to-end header lost: %v", r.Header)
	}
}

func TestBadRequests(t *testing.T) {
	u := &upstreams{}
	proxy, _ := serve(t, Config{DialContext: u.dial}, Policy{AllowAll: true})
	for _, raw := range []string{
		"GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET ftp://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT noport HTTP/1.1\r\nHost: noport\r\n\r\n",
		"CONNECT host.test:0 HTTP/1.1\r\nHost: host.test:0\r\n\r\n",
	} {
		status, _ := rawRequest(t, proxy.Host, raw)
		if status != 400 {
			t.Errorf("%q: status %d, want 400", strings.SplitN(raw, "\r\n", 2)[0], status)
		}
	}
	if u.dials.Load() != 0 {
		t.Error("a bad request dialed upstream")
	}
}

// rawRequest sends raw and returns the response's status and body.
func rawRequest(t *testing.T, addr, raw string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The default dialer keeps allowInternetAccess from reaching the daemon's
// host: its loopback, whatever name leads there.
func TestGuardedDialer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "daemon api")
	}))
	defer up.Close()
	proxy, _ := serve(t, Config{}, Policy{AllowAll: true})
	c := proxyClient(t, proxy)
	_, port, _ := net.SplitHostPort(hostOf(up))
	for _, target := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		resp, err := c.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "loopback") {
			t.Errorf("GET %s = %d %q, want 403 naming loopback", target, resp.StatusCode, b)
		}
	}
	if _, err := c.Get("https://127.0.0.1:" + port + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT to loopback: err = %v, want Forbidden", err)
	}
}

// echoServer echoes each connection until EOF, then closes it; it reports
// each connection's end on ended.
func echoServer(t *testing.T) (addr string, ended chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ended = make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	return l.Addr().String(), ended
}

func connectTunnel(t *testing.T, proxy, target, early string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The first bytes follow the request at once, as a TLS hello would.
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n%s", target, target, early)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	return c, br
}

func TestConnectTCP(t *testing.T) {
	echo, ended := echoServer(t)
	u := &upstreams{hosts: map[string]string{"echo.test:7": echo}}
	proxy, _ := serve(t, Config{DialContext: u.dial}, Policy{Domains: []string{"echo.test"}})
	c, br := connectTunnel(t, proxy.Host, "echo.test:7", "early ")
	if _, err := io.WriteString(c, "late"); err != nil {
		t.Fatal(err)
	}
	// A half close travels through: the echo sees EOF, answers, closes.
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "early late" {
		t.Errorf("tunnel echoed %q, %v; want %q and EOF", got, err, "early late")
	}
	waitFor(t, ended, "upstream connection to end")
}

// A client may send everything and half-close before the tunnel is up.
func TestConnectEarlyHalfClose(t *testing.T) {
	echo, _ := echoServer(t)
	u := &upstreams{hosts: map[string]string{"echo.test:7": echo}}
	proxy, _ := serve(t, Config{DialContext: u.dial}, Policy{AllowAll: true})
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\nall at once")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 200") || !strings.HasSuffix(string(got), "\r\n\r\nall at once") {
		t.Errorf("tunnel answered %q, %v", got, err)
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A client that goes away takes its upstream connections with it, and
// stopping the proxy ends every tunnel.
func TestNothingLeaks(t *testing.T) {
	echo, ended := echoServer(t)
	upGone := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "chunk %d\n", i); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				upGone <- struct{}{}
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		upGone <- struct{}{}
	}))
	defer slow.Close()
	u := &upstreams{hosts: map[string]string{"echo.test:7": echo, "slow.test:80": hostOf(slow)}}
	proxy, stop := serve(t, Config{DialContext: u.dial}, Policy{AllowAll: true})

	// A tunnel whose client disconnects.
	c, _ := connectTunnel(t, proxy.Host, "echo.test:7", "")
	c.Close()
	waitFor(t, ended, "upstream of a closed tunnel to end")

	// A forwarded response whose client disconnects mid-stream.
	c2, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c2, "GET http://slow.test/ HTTP/1.1\r\nHost: slow.test\r\n\r\n")
	if _, err := bufio.NewReader(c2).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	waitFor(t, upGone, "upstream request of a gone client to end")

	// A tunnel still open when the proxy stops.
	connectTunnel(t, proxy.Host, "echo.test:7", "")
	stop()
	waitFor(t, ended, "upstream of an open tunnel to end when the proxy stops")
}

// Stopping the proxy does not wait for a dial to time out.
func TestStopDuringDial(t *testing.T) {
	dialing := make(chan struct{}, 1)
	hang := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialing <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	proxy, stop := serve(t, Config{DialContext: hang}, Policy{AllowAll: true})
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT slow.test:443 HTTP/1.1\r\nHost: slow.test:443\r\n\r\n")
	waitFor(t, dialing, "the dial to start")
	start := time.Now()
	stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stop took %v with a dial pending", d)
	}
}

// MaxConns holds further clients in the backlog until one leaves.
func TestMaxConns(t *testing.T) {
	echo, ended := echoServer(t)
	u := &upstreams{hosts: map[string]string{"echo.test:7": echo}}
	proxy, _ := serve(t, Config{DialContext: u.dial, MaxConns: 1}, Policy{AllowAll: true})
	first, _ := connectTunnel(t, proxy.Host, "echo.test:7", "")

	second := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", proxy.Host)
		if err != nil {
			second <- err
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\n")
		_, err = http.ReadResponse(bufio.NewReader(c), nil)
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("second client served while the first holds the only slot: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	waitFor(t, ended, "first tunnel to end")
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second client not served after the first left")
	}
}

func TestIdleTimeout(t *testing.T) {
	echo, ended := echoServer(t)
	u := &upstreams{hosts: map[string]string{"echo.test:7": echo}}
	proxy, _ := serve(t, Config{DialContext: u.dial, IdleTimeout: 200 * time.Millisecond}, Policy{AllowAll: true})
	c, br := connectTunnel(t, proxy.Host, "echo.test:7", "")
	// Traffic keeps it open past the timeout.
	for range 4 {
		io.WriteString(c, "x")
		if _, err := br.ReadByte(); err != nil {
			t.Fatalf("tunnel closed while in use: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("idle tunnel read: %v, want EOF", err)
	}
	waitFor(t, ended, "idle tunnel's upstream to end")
}

// The proxy serves a unix socket as the runtime makes it.
func TestServeUnix(t *testing.T) {
	echo, _ := echoServer(t)
	u := &upstreams{hosts: map[string]string{"echo.test:7": echo}}
	dir := t.TempDir()
	l, err := net.Listen("unix", dir+"/p.sock")
	if err != nil {
		t.Fatalf("unix socket: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(Config{DialContext: u.dial}).Serve(ctx, l, Policy{Domains: []string{"echo.test"}}) }()
	c, err := net.Dial("unix", dir+"/p.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\nping")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT over unix: %v %v", resp, err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo over unix = %q, %v", buf, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
