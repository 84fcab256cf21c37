package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testServer serves h as the daemon serves its API (NewServer, LimitListener), with cfg's limits, on
// a loopback port, and returns the address.
func testServer(t *testing.T, cfg ServerConfig, h http.Handler) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, h, log)
	go srv.Serve(LimitListener(l, cfg, log))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	})
	return l.Addr().String()
}

// echoLen answers the number of body bytes read, or 400 when reading
// failed.
var echoLen = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprint(w, n)
})

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ended waits up to limit for the server to answer or close c, and says
// how long it took; reaching limit fails the test.
func ended(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the connection after %v", limit)
	}
	return time.Since(start)
}

// Headers, then a body that never comes: the connection is ended once no
// byte has come for StallTimeout.
func TestBodyStallEndsRequest(t *testing.T) {
	addr := testServer(t, ServerConfig{StallTimeout: 300 * time.Millisecond}, echoLen)
	c := dial(t, addr)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nsome")
	if d := ended(t, c, 5*time.Second); d < 200*time.Millisecond {
		t.Errorf("ended after %v, before the stall timeout", d)
	}
}

// A keep-alive connection left idle is closed after IdleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	addr := testServer(t, ServerConfig{IdleTimeout: 300 * time.Millisecond}, echoLen)
	c := dial(t, addr)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ended(t, c, 5*time.Second)
}

// An upload on a slow link takes far longer than StallTimeout and
// completes, because bytes keep coming; so does a handler that works
// longer than StallTimeout after reading the body.
func TestSlowProgressCompletes(t *testing.T) {
	var slowHandlerErr atomic.Value
	mux := http.NewServeMux()
	mux.Handle("/upload", echoLen)
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
			slowHandlerErr.Store(r.Context().Err())
		}
		io.WriteString(w, "done")
	})
	// A write every 100 ms against a 1 s stall timeout: ten times the
	// margin, for a loaded machine's scheduling.
	addr := testServer(t, ServerConfig{StallTimeout: time.Second}, mux)

	pr, pw := io.Pipe()
	go func() {
		for range 25 {
			time.Sleep(100 * time.Millisecond)
			pw.Write([]byte(strings.Repeat("x", 1000)))
		}
		pw.Close()
	}()
	resp, err := http.Post("http://"+addr+"/upload", "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "25000" {
		t.Errorf("slow upload: %d %q, want 200 25000", resp.StatusCode, b)
	}

	resp, err = http.Post("http://"+addr+"/work", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "done" || slowHandlerErr.Load() != nil {
		t.Errorf("a handler working past the stall timeout: %q, context %v", b, slowHandlerErr.Load())
	}
}

// A client that stops reading a response is dropped once a write has
// waited StallTimeout; one that reads slowly is not.
func TestWriteStall(t *testing.T) {
	writeErr := make(chan error, 1)
	big := strings.Repeat("x", 64<<10)
	addr := testServer(t, ServerConfig{StallTimeout: 300 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 1000 { // 64 MiB: more than any socket buffers
			if _, err := io.WriteString(w, big); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}))
	c := dial(t, addr)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-writeErr:
		if err == nil {
			t.Error("the handler wrote 64 MiB to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a client that reads nothing still waits after 10s")
	}
}

// A header larger than MaxHeaderBytes is refused.
func TestMaxHeaderBytes(t *testing.T) {
	addr := testServer(t, ServerConfig{MaxHeaderBytes: 4 << 10}, echoLen)
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// One client address holds at most MaxConnsPerClient connections; more
// are answered 429 and closed, and a freed slot is taken again.
func TestMaxConnsPerClient(t *testing.T) {
	addr := testServer(t, ServerConfig{MaxConnsPerClient: 2}, echoLen)
	roundTrip := func(c net.Conn) (int, error) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	a, b := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{a, b} {
		if code, err := roundTrip(c); err != nil || code != 200 {
			t.Fatalf("a connection within the limit: %d, %v", code, err)
		}
	}
	if code, err := roundTrip(dial(t, addr)); err == nil && code != http.StatusTooManyRequests {
		t.Errorf("a third connection: %d, want 429 or closed", code)
	}
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, err := roundTrip(dial(t, addr))
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after one closed, a new connection: %d, %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// At MaxConns, a further connection waits until one closes.
func TestMaxConns(t *testing.T) {
	addr := testServer(t, ServerConfig{MaxConns: 2}, echoLen)
	a, _ := dial(t, addr), dial(t, addr)
	c := dial(t, addr)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection beyond MaxConns was served")
	}
	a.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("once a slot was free: %v, %v", resp, err)
	}
}

// The sandboxes' channels share MaxConns, and each holds at most
// MaxConnsPerClient: a connection past either waits until one closes.
func TestChannelLimit(t *testing.T) {
	_, channel := channels(t, ServerConfig{MaxConns: 3, MaxConnsPerClient: 2})
	a, b := channel(), channel()
	a1, a2 := dial(t, a), dial(t, a)
	if !served(t, a1, 5*time.Second) || !served(t, a2, 5*time.Second) {
		t.Fatal("a channel's connections within the limits were not served")
	}
	if a3 := dial(t, a); served(t, a3, 300*time.Millisecond) {
		t.Error("a channel's connection past MaxConnsPerClient was served")
	}
	b1 := dial(t, b)
	if !served(t, b1, 5*time.Second) {
		t.Fatal("another channel's first connection was not served")
	}
	b2 := dial(t, b)
	if served(t, b2, 300*time.Millisecond) {
		t.Fatal("a connection past the channels' shared MaxConns was served")
	}
	b1.Close() // b2 waits for a shared slot: b1's
	_ = b2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(b2), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("once a shared slot was free: %v, %v", resp, err)
	}
}

// A channel with nothing to accept holds no shared slot: channels many
// more than MaxConns, idle, leave them to those that are used.
func TestChannelLimitIdle(t *testing.T) {
	_, channel := channels(t, ServerConfig{MaxConns: 1})
	idle := channel()
	time.Sleep(200 * time.Millisecond) // its Accept waits, with nothing to accept
	used := channel()
	for i, ch := range []string{used, idle, used} {
		c := dial(t, ch)
		if !served(t, c, 2*time.Second) {
			t.Fatalf("connection %d: not served while the other channel was idle", i)
		}
		c.Close()
	}
}

// channels returns a limit of cfg and a function that serves a new
// channel under it and returns its address.
func channels(t *testing.T, cfg ServerConfig) (*ChannelLimit, func() string) {
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	limit := NewChannelLimit(cfg, log)
	return limit, func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0") // a channel is served as any listener
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServer(ServerConfig{}, echoLen, log)
		go srv.Serve(limit.Listener(l))
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String()
	}
}

// served says whether a request on c is answered 200 within the time.
func served(t *testing.T, c net.Conn, within time.Duration) bool {
	t.Helper()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// Streams that wait for output longer than StallTimeout go on, and so
// does a hijacked connection (a WebSocket through the port gateway).
func TestStreamsExempt(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "event: tick\ndata: %d\n\n", i)
			if err := http.NewResponseController(w).Flush(); err != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	mux.HandleFunc("/upgrade", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the client closes
	})
	addr := testServer(t, ServerConfig{StallTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}, mux)

	resp, err := http.Get("http://" + addr + "/events")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.Count(string(b), "event: tick") != 3 {
		t.Errorf("event stream: %q, %v; want 3 events", b, err)
	}

	c := dial(t, addr)
	fmt.Fprintf(c, "GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	for _, msg := range []string{"one\n", "two\n"} {
		time.Sleep(700 * time.Millisecond) // past the stall and idle timeouts
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, msg)
		if got, err := br.ReadString('\n'); err != nil || got != msg {
			t.Fatalf("echo after a pause: %q, %v", got, err)
		}
	}
}
