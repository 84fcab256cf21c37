package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// acceptAgent serves an agent with token whose accept address "svc" is a
// loopback listener, and returns a client, the address sandbox processes
// connect to, and the ctx cancel that stops the agent (waiting for it).
func acceptAgent(t *testing.T, token string) (*Client, string, func()) {
	t.Helper()
	local, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock, _, stop := serveAgent(t, func(dir string) ServerConfig {
		return ServerConfig{UID: -1, GID: -1, Cwd: dir, Token: token, Accept: map[string]net.Listener{"svc": local}}
	})
	c := NewClient(UnixDialer(sock), token)
	t.Cleanup(c.Close)
	return c, local.Addr().String(), stop
}

// echoServe answers each connection of l as a service would: with the
// name and what it read, after the client's half close.
func echoServe(l net.Listener, name string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b, _ := io.ReadAll(c)
			fmt.Fprintf(c, "%s got %s", name, b)
		}()
	}
}

// roundTrip connects to addr as a sandbox process, sends msg, half-closes
// and returns the whole answer.
func roundTrip(addr, msg string) (string, error) {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestAcceptPairs(t *testing.T) {
	c, addr, _ := acceptAgent(t, "s3cret")
	l := c.Listen("svc", 2, nil)
	defer l.Close()
	go echoServe(l, "daemon")
	// Many at once, more than the requests kept waiting, and large ones.
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			msg := fmt.Sprintf("hello %d ", i) + strings.Repeat("x", i*4096)
			got, err := roundTrip(addr, msg)
			if err == nil && got != "daemon got "+msg {
				err = fmt.Errorf("connection %d: answer of %d bytes, want %d", i, len(got), len("daemon got "+msg))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The daemon's side half-closes too: the sandbox process reads the end of
// the answer and can still send.
func TestAcceptHalfCloseFromDaemon(t *testing.T) {
	c, addr, _ := acceptAgent(t, "")
	l := c.Listen("svc", 1, nil)
	defer l.Close()
	local, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	_ = local.SetDeadline(time.Now().Add(10 * time.Second))
	up, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	io.WriteString(up, "greeting first")
	if err := up.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(local)
	if err != nil || string(got) != "greeting first" {
		t.Fatalf("the sandbox read %q, %v", got, err)
	}
	io.WriteString(local, "still sending")
	local.(*net.TCPConn).CloseWrite()
	_ = up.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(up); err != nil || string(got) != "still sending" {
		t.Errorf("the daemon read %q, %v", got, err)
	}
}

func TestAcceptRefusals(t *testing.T) {
	c, _, _ := acceptAgent(t, "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrong := NewClient(func(ctx context.Context) (net.Conn, error) { return c.tr.DialContext(ctx, "unix", "agent") }, "wrong")
	defer wrong.Close()
	if _, err := wrong.Accept(ctx, "svc"); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("Accept with a wrong token: %v, want unauthenticated", err)
	}
	if _, err := c.Accept(ctx, "other"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Accept of a name the agent does not serve: %v, want not found", err)
	}
	// Without the upgrade, no waiting.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/accept?name=svc", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("accept without Upgrade: %s, want 400", resp.Status)
	}
	// A cancelled wait ends at once.
	waiting, stop := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, stop)
	if _, err := c.Accept(waiting, "svc"); !errors.Is(err, context.Canceled) {
		t.Errorf("Accept cancelled while waiting: %v", err)
	}
}

// A request whose daemon went away while it waited does not take a local
// connection: the next request does.
func TestAcceptDaemonGoneWhileWaiting(t *testing.T) {
	c, addr, _ := acceptAgent(t, "")
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := c.Accept(ctx, "svc")
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond) // let it reach the agent
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Accept: %v", err)
		}
	}
	// The agent sees the closed connections as they close; the local
	// connection below comes after.
	time.Sleep(100 * time.Millisecond)
	l := c.Listen("svc", 1, nil)
	defer l.Close()
	go echoServe(l, "daemon")
	if got, err := roundTrip(addr, "after"); err != nil || got != "daemon got after" {
		t.Errorf("a local connection after abandoned requests: %q, %v", got, err)
	}
}

// The daemon's end closing ends the sandbox's connection; a local
// connection nobody accepts is closed after its wait.
func TestAcceptDaemonDrops(t *testing.T) {
	c, addr, _ := acceptAgent(t, "")
	l := c.Listen("svc", 1, nil)
	local, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	up, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	up.Close()
	_ = local.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := local.Read(make([]byte, 1)); err == nil {
		t.Error("the sandbox's connection still open after the daemon closed its end")
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

// The agent's end closes every relayed connection and the address.
func TestAcceptAgentStopClosesAll(t *testing.T) {
	before := goruntime.NumGoroutine()
	c, addr, stop := acceptAgent(t, "")
	l := c.Listen("svc", 3, nil)
	var locals, ups []net.Conn
	for range 3 {
		local, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer local.Close()
		up, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer up.Close()
		locals, ups = append(locals, local), append(ups, up)
	}
	stop()
	for i := range locals {
		for _, conn := range []net.Conn{locals[i], ups[i]} {
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("a relayed connection after the agent stopped: %v, want closed", err)
			}
		}
	}
	if conn, err := net.Dial("tcp4", addr); err == nil {
		conn.Close()
		t.Error("the accept address still listens after the agent stopped")
	}
	l.Close()
	for _, conn := range append(locals, ups...) {
		conn.Close()
	}
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after, %d before:\n%s", n, before, buf[:goruntime.Stack(buf, true)])
	}
}

// The waiting requests of a Listener survive an agent that is not there
// yet: they retry until it is.
func TestListenRetries(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	c := NewClient(UnixDialer(sock), "")
	defer c.Close()
	l := c.Listen("svc", 1, nil)
	defer l.Close()
	go echoServe(l, "late daemon")
	time.Sleep(200 * time.Millisecond) // a few failed tries
	al, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	local, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go NewServer(ServerConfig{UID: -1, GID: -1, Accept: map[string]net.Listener{"svc": local}}).Serve(ctx, al)
	if got, err := roundTrip(local.Addr().String(), "x"); err != nil || got != "late daemon got x" {
		t.Errorf("through a listener that started before the agent: %q, %v", got, err)
	}
}

// BenchmarkServicesPath compares a sandbox's new connection and request to
// the daemon's services on the two paths: the oci runtime's forward to a
// unix socket, and the daemon's accept requests waiting in the agent.
func BenchmarkServicesPath(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	get := func(b *testing.B, addr string) {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		b.ResetTimer()
		for b.Loop() {
			resp, err := hc.Get("http://" + addr + "/")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("forward", func(b *testing.B) {
		sock := filepath.Join(b.TempDir(), "svc.sock")
		ul, err := net.Listen("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		go http.Serve(ul, handler)
		defer ul.Close()
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go Forward(ctx, l, unixDialer(sock))
		get(b, l.Addr().String())
	})
	b.Run("accept", func(b *testing.B) {
		local, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		sock, _, _ := serveAgent(b, func(dir string) ServerConfig {
			return ServerConfig{UID: -1, GID: -1, Cwd: dir, Accept: map[string]net.Listener{"svc": local}}
		})
		c := NewClient(UnixDialer(sock), "")
		defer c.Close()
		l := c.Listen("svc", 2, nil)
		defer l.Close()
		go http.Serve(l, handler)
		get(b, local.Addr().String())
	})
}
