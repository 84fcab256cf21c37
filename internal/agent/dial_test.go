package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// echoListener serves on a loopback port: it echoes until EOF, then
// writes "bye" and closes. It reports each connection's end on ended.
func echoListener(t *testing.T, network, addr string) (port int, ended chan struct{}) {
	t.Helper()
	l, err := net.Listen(network, addr)
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
				io.WriteString(c, "bye")
				c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, ended
}

func waitEnded(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestDialPort(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	port, ended := echoListener(t, "tcp4", "127.0.0.1:0")

	conn, err := c.DialPort(ctx, port)
	if err != nil {
		t.Fatalf("DialPort: %v", err)
	}
	defer conn.Close()
	for _, msg := range []string{"hello", strings.Repeat("x", 256<<10)} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo of %d bytes: %v", len(msg), err)
		}
	}
	// A half close reaches the server, whose answer still comes back.
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(conn)
	if err != nil || string(rest) != "bye" {
		t.Errorf("after half close: %q, %v; want bye and EOF", rest, err)
	}
	waitEnded(t, ended, "the sandbox-side connection to end")

	// The agent still serves requests after pipes.
	if _, err := c.Info(ctx); err != nil {
		t.Errorf("Info after DialPort: %v", err)
	}
}

// A server that listens only on ::1 (as "localhost" servers may) is
// reached too: a refused IPv4 dial falls back to IPv6, and nothing else
// does. The dial is a fake, so the host needs no IPv6 loopback.
func TestDialLoopbackFallback(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp4", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timedOut := &net.OpError{Op: "dial", Net: "tcp4", Err: os.ErrDeadlineExceeded}
	v6Refused := &net.OpError{Op: "dial", Net: "tcp6", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	v4Conn, v6Conn := &net.TCPConn{}, &net.TCPConn{}
	for _, tt := range []struct {
		name     string
		v4, v6   error
		want     net.Conn
		wantErr  error
		wantDial []string
	}{
		{name: "IPv4 answers", want: v4Conn, wantDial: []string{"tcp4 127.0.0.1:8080"}},
		{name: "IPv4 refused, IPv6 answers", v4: refused, want: v6Conn,
			wantDial: []string{"tcp4 127.0.0.1:8080", "tcp6 [::1]:8080"}},
		{name: "both refused", v4: refused, v6: v6Refused, wantErr: refused,
			wantDial: []string{"tcp4 127.0.0.1:8080", "tcp6 [::1]:8080"}},
		{name: "IPv4 timed out", v4: timedOut, wantErr: timedOut, wantDial: []string{"tcp4 127.0.0.1:8080"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var dialed []string
			dial := func(_ context.Context, network, addr string) (net.Conn, error) {
				dialed = append(dialed, network+" "+addr)
				if network == "tcp4" {
					if tt.v4 != nil {
						return nil, tt.v4
					}
					return v4Conn, nil
				}
				if tt.v6 != nil {
					return nil, tt.v6
				}
				return v6Conn, nil
			}
			c, err := dialLoopbackWith(context.Background(), dial, 8080)
			if c != tt.want || err != tt.wantErr {
				t.Errorf("dialLoopbackWith = %v, %v; want %v, %v", c, err, tt.want, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantDial, dialed); diff != "" {
				t.Errorf("dials (-want +got):\n%s", diff)
			}
		})
	}
}

// The client's closing of the pipe ends the sandbox-side connection.
func TestDialPortClientClose(t *testing.T) {
	c, _ := startAgent(t)
	port, ended := echoListener(t, "tcp4", "127.0.0.1:0")
	conn, err := c.DialPort(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	waitEnded(t, ended, "the sandbox-side connection to end")
}

func TestDialPortErrors(t *testing.T) {
	c, _ := startAgent(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if _, err := c.DialPort(context.Background(), closed); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("DialPort to a closed port: %v, want unavailable, connection refused", err)
	}
	for _, p := range []int{0, -1, 65536} {
		if _, err := c.DialPort(context.Background(), p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("DialPort(%d): %v, want invalid argument", p, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.DialPort(ctx, closed); !errors.Is(err, context.Canceled) {
		t.Errorf("DialPort with a cancelled ctx: %v", err)
	}
}

// TestDialReservedPort: the ports that serve the daemon's services to the
// sandbox (its LLM proxy and MCP, its egress proxy) act as the sandbox, so
// they are refused to clients outside it; any other port is reached.
func TestDialReservedPort(t *testing.T) {
	reserved, _ := echoListener(t, "tcp4", "127.0.0.1:0")
	open, _ := echoListener(t, "tcp4", "127.0.0.1:0")
	sock, _, _ := serveAgent(t, func(dir string) ServerConfig {
		return ServerConfig{Cwd: dir, UID: -1, GID: -1, Reserved: []int{reserved}}
	})
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	if conn, err := c.DialPort(context.Background(), reserved); !errors.Is(err, errdefs.ErrPermissionDenied) {
		if err == nil {
			conn.Close()
		}
		t.Errorf("DialPort to a reserved port: %v, want permission denied", err)
	}
	conn, err := c.DialPort(context.Background(), open)
	if err != nil {
		t.Fatalf("DialPort to another port: %v", err)
	}
	conn.Close()
}

func TestDialPortToken(t *testing.T) {
	dir, _ := os.MkdirTemp("", "a2e-agent-")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go NewServer(ServerConfig{UID: -1, GID: -1, Token: "s3cret"}).Serve(ctx, l)
	port, _ := echoListener(t, "tcp4", "127.0.0.1:0")
	if _, err := NewClient(UnixDialer(sock), "wrong").DialPort(ctx, port); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("DialPort with a wrong token: %v, want unauthenticated", err)
	}
	conn, err := NewClient(UnixDialer(sock), "s3cret").DialPort(ctx, port)
	if err != nil {
		t.Fatalf("DialPort with the token: %v", err)
	}
	conn.Close()
}

func TestForward(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "proxy.sock")
	// The "proxy": answers each connection with what it read, prefixed.
	pl, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	upEnded := make(chan struct{}, 4)
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			go func() {
				b, _ := io.ReadAll(c)
				fmt.Fprintf(c, "proxy got %s", b)
				c.Close()
				upEnded <- struct{}{}
			}()
		}
	}()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Forward(ctx, l, unixDialer(sock)) }()

	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT x:1 HTTP/1.1\r\n\r\n")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "proxy got CONNECT x:1 HTTP/1.1\r\n\r\n" {
		t.Errorf("relayed answer = %q, %v", got, err)
	}
	c.Close()
	waitEnded(t, upEnded, "the proxy side to end")

	// Stopping the forwarder ends open relays and the listener.
	open, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	io.WriteString(open, "x")
	time.Sleep(100 * time.Millisecond) // let the relay start
	cancel()
	if err := <-done; err != nil {
		t.Errorf("forward: %v", err)
	}
	waitEnded(t, upEnded, "an open relay to end when the forwarder stops")
	if c, err := net.Dial("tcp4", l.Addr().String()); err == nil {
		c.Close()
		t.Error("forwarder still listens after stop")
	}
}

// Without the proxy, a client waits for it within the dial's bound (the
// forwarder's is dialTimeout; shorter here), then is disconnected, not
// left hanging.
func TestForwardNoProxy(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const bound = 300 * time.Millisecond
	dial := unixDialer(filepath.Join(t.TempDir(), "missing.sock"))
	go Forward(ctx, l, func(ctx context.Context) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		return dial(ctx)
	})
	start := time.Now()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read without a proxy: %v, want EOF", err)
	}
	if waited := time.Since(start); waited < bound {
		t.Errorf("disconnected after %v, before the dial's bound (%v): the proxy was not waited for", waited, bound)
	}
}

// A client that connects while the daemon behind the socket restarts (its
// socket refusing, then gone, then served again) is relayed once it is
// back, rather than disconnected.
func TestForwardDaemonRestart(t *testing.T) {
	for _, away := range []string{"refused", "not there"} {
		t.Run(away, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "services.sock")
			// A socket file nothing listens on any more: refused.
			old, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			old.(*net.UnixListener).SetUnlinkOnClose(away == "not there")
			old.Close()
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go Forward(ctx, l, unixDialer(sock))
			c, err := net.Dial("tcp4", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET /llm/v1/models HTTP/1.0\r\n\r\n")
			time.Sleep(300 * time.Millisecond) // the daemon is away
			os.Remove(sock)
			back, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			go func() {
				s, err := back.Accept()
				if err != nil {
					return
				}
				defer s.Close()
				line, _ := bufio.NewReader(s).ReadString('\n')
				fmt.Fprintf(s, "back: %s", line)
			}()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := io.ReadAll(c)
			if want := "back: GET /llm/v1/models HTTP/1.0\r\n"; string(got) != want {
				t.Errorf("the client got %q (%v), want %q", got, err, want)
			}
		})
	}
}

func TestEgressEnvDefersToTemplate(t *testing.T) {
	env := mergeEnv(EgressEnv, []string{"NO_PROXY=localhost,127.0.0.1,internal.example", "PATH=/bin"})
	var noProxy, httpProxy string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NO_PROXY="); ok {
			noProxy = v
		}
		if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
			httpProxy = v
		}
	}
	if noProxy != "localhost,127.0.0.1,internal.example" || httpProxy != "http://"+EgressAddr {
		t.Errorf("env = %v", env)
	}
}

func TestServicesEnvDefersToTemplate(t *testing.T) {
	env := mergeEnv(ServicesEnv, []string{"OPENAI_BASE_URL=http://mine/v1", "OPENAI_API_KEY=sk-mine", "PATH=/bin"})
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		"OPENAI_BASE_URL": "http://mine/v1", "OPENAI_API_KEY": "sk-mine", // the template's
		"ANTHROPIC_BASE_URL": "http://" + ServicesAddr + "/llm", "ANTHROPIC_API_KEY": "agent2env", // the defaults
		"AGENT2ENV_LLM_URL": "http://" + ServicesAddr + "/llm", "PATH": "/bin",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (env %v)", k, got[k], v, env)
		}
	}
}

// TestConnErrorsNameNoAddress: an agent that cannot be reached, or whose
// connection breaks, is unavailable, and the error does not name the
// connection's addresses (the daemon's socket path on the host), which
// reach the daemon's clients.
func TestConnErrorsNameNoAddress(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "secret-dir", "agent.sock")
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"a request": func() error { _, err := c.Stat(ctx, "/"); return err },
		"a dial":    func() error { _, err := c.DialPort(ctx, 80); return err },
	} {
		err := op()
		if !errors.Is(err, errdefs.ErrUnavailable) || strings.Contains(err.Error(), "secret-dir") {
			t.Errorf("%s: %v, want unavailable without the socket's path", name, err)
		}
	}
}
