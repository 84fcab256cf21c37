package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/gateway"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// testInternet is a loopback listener on the host standing for the
// internet, reached through a proxy whose dialer maps test names to it.
type testInternet struct {
	port     int
	requests atomic.Int64 // answered
	dials    atomic.Int64 // by the proxy
	proxy    *netproxy.Proxy
}

func newTestInternet(t *testing.T) *testInternet {
	t.Helper()
	in := &testInternet{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.requests.Add(1)
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	in.port = srv.Listener.Addr().(*net.TCPAddr).Port
	in.proxy = netproxy.New(netproxy.Config{
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
			in.dials.Add(1)
			host, _, _ := net.SplitHostPort(hostport)
			if !strings.HasSuffix(host, ".test") {
				return nil, fmt.Errorf("%s is not a test host", host)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	return in
}

func newEgressRuntime(t testing.TB, root string, proxy runtime.EgressProxy) *Runtime {
	t.Helper()
	rt, err := New(Config{
		Root:        root,
		AgentBinary: agentBin,
		Images:      testImages{},
		Egress:      proxy,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	return rt
}

// run runs a shell command in the sandbox and returns its exit code and
// combined output. (Busybox wget's -T crashes on a refused connection:
// the tests do without it.)
func run(t *testing.T, c *agent.Client, script string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Exec(ctx, agent.ExecRequest{Shell: script, Timeout: 20 * time.Second}, nil, &out, &out)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res.ExitCode, out.String()
}

func TestEgress(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	in := newTestInternet(t)
	root := newRoot(t)
	rt := newEgressRuntime(t, root, in.proxy)
	sp := newSpec(t, "egress")
	sp.Resources.DiskBytes = 32 << 20
	sp.Network.Egress = &sandbox.Egress{AllowedDomains: []string{"allowed.test", "*.wild.test"}}
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	c, _ := rt.Agent(ctx, sp.ID)

	if code, out := run(t, c, "echo $HTTP_PROXY $https_proxy $NO_PROXY"); code != 0 || out != "http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1\n" {
		t.Errorf("proxy environment = %q (exit %d)", out, code)
	}
	for _, host := range []string{"allowed.test", "api.wild.test"} {
		if code, out := run(t, c, "wget -q -O - http://"+host+"/"); code != 0 || out != "hello from "+host {
			t.Errorf("wget %s through the proxy: exit %d, %q", host, code, out)
		}
	}
	// CONNECT, as HTTPS clients use it, by hand.
	connect := `printf 'CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\nGET / HTTP/1.0\r\nHost: tunnel.test\r\n\r\n' | nc -w 5 127.0.0.1 3128`
	if code, out := run(t, c, connect); code != 0 || !strings.Contains(out, "200 Connection established") || !strings.HasSuffix(out, "hello from tunnel.test") {
		t.Errorf("CONNECT through the proxy: exit %d, %q", code, out)
	}

	// Refused by policy: the proxy answers 403 and dials nothing.
	dials := in.dials.Load()
	for _, url := range []string{"http://denied.test/", "http://wild.test/", fmt.Sprintf("http://127.0.0.1:%d/", in.port)} {
		code, out := run(t, c, "env -u NO_PROXY -u no_proxy wget -q -O - "+url+" 2>&1")
		if code == 0 || !strings.Contains(out, "403") {
			t.Errorf("wget %s: exit %d, %q; want a 403 failure", url, code, out)
		}
	}
	if in.dials.Load() != dials {
		t.Errorf("the proxy dialed for a refused host")
	}
	// Around the proxy, the host's listener stays out of reach.
	requests := in.requests.Load()
	if code, out := run(t, c, fmt.Sprintf("wget -q -O - http://127.0.0.1:%d/ 2>&1; nc -w 2 127.0.0.1 %d </dev/null", in.port, in.port)); code == 0 || strings.Contains(out, "hello") {
		t.Errorf("reached the host's listener directly: exit %d, %q", code, out)
	}
	if in.requests.Load() != requests {
		t.Errorf("the host's listener was reached directly")
	}
	// The proxy socket is the agent's, not the user's.
	if code, out := run(t, c, "ls /.agent2env/egress 2>&1"); code == 0 {
		t.Errorf("user lists the egress socket dir: %q", out)
	}

	// A restarted daemon serves the socket of the running sandbox again.
	rt.Close() // as the old daemon does on its way out
	if code, out := run(t, c, "wget -q -O - http://allowed.test/ 2>&1"); code == 0 {
		t.Fatalf("wget with the proxy gone succeeded: %q", out)
	}
	rt2 := newEgressRuntime(t, root, in.proxy)
	if _, err := rt2.Recover(ctx); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	c2, _ := rt2.Agent(ctx, sp.ID)
	if code, out := run(t, c2, "wget -q -O - http://allowed.test/"); code != 0 || out != "hello from allowed.test" {
		t.Errorf("wget after Recover: exit %d, %q", code, out)
	}
	// Stop ends the proxy with the sandbox; Start brings both back.
	if err := rt2.Stop(ctx, sp.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt2.egress[sp.ID]; ok {
		t.Error("egress proxy still served after Stop")
	}
	if err := rt2.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, c2, "wget -q -O - http://allowed.test/"); code != 0 || out != "hello from allowed.test" {
		t.Errorf("wget after Stop and Start: exit %d, %q", code, out)
	}
	if err := rt2.Delete(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt2.egress[sp.ID]; ok {
		t.Error("egress proxy still served after Delete")
	}
	runtimetest.AssertNoLeaks(t, root)
}

// A sandbox without egress has no proxy and no way to one, and a runtime
// without a proxy refuses sandboxes that need it.
func TestNoEgress(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	in := newTestInternet(t)
	root := newRoot(t)
	rt := newEgressRuntime(t, root, in.proxy)
	startSandbox(t, rt, "noegress")
	defer rt.Delete(ctx, "noegress")
	c, _ := rt.Agent(ctx, "noegress")
	if code, out := run(t, c, "env | grep -i _proxy"); code == 0 {
		t.Errorf("proxy environment without egress: %q", out)
	}
	code, out := run(t, c, "http_proxy=http://127.0.0.1:3128 wget -q -O - http://allowed.test/ 2>&1")
	if code == 0 || !strings.Contains(out, "refused") {
		t.Errorf("wget through 127.0.0.1:3128 without egress: exit %d, %q; want connection refused", code, out)
	}
	if code, _ := run(t, c, "test -e /.agent2env/egress"); code == 0 {
		t.Error("egress dir mounted without egress")
	}
	if in.dials.Load() != 0 || in.requests.Load() != 0 {
		t.Error("a sandbox without egress reached the proxy")
	}

	plain := newRuntime(t, newRoot(t), "runc")
	sp := newSpec(t, "wantsegress")
	sp.Network.Egress = &sandbox.Egress{AllowInternet: true}
	if err := plain.Create(ctx, sp); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Create with egress on a runtime without a proxy: %v, want invalid argument", err)
	}
}

// portSandbox is the gateway's view of one real sandbox.
type portSandbox struct {
	id, token string
	c         *agent.Client
}

func (p *portSandbox) Authorize(ctx context.Context, id, token string) error {
	if id != p.id {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	if token != p.token {
		return errdefs.ErrUnauthenticated
	}
	return nil
}

func (p *portSandbox) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	return p.c.DialPort(ctx, port)
}

// The gateway reaches a server on a real sandbox's loopback through the
// agent, and nothing else does.
func TestGatewayIntoSandbox(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	rt := newRuntime(t, newRoot(t), "runc")
	startSandbox(t, rt, "ports")
	defer rt.Delete(ctx, "ports")
	c, _ := rt.Agent(ctx, "ports")
	if code, out := run(t, c, "mkdir -p /tmp/www && echo 'inside the sandbox' >/tmp/www/index.html"); code != 0 {
		t.Fatalf("make web root: %s", out)
	}
	res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/tmp/www"}, Main: true}, nil, nil, nil)
	if err != nil || res.Error != "" {
		t.Fatalf("start httpd: %+v, %v", res, err)
	}

	mux := http.NewServeMux()
	g := gateway.New(&portSandbox{id: "ports", token: "t0k3n", c: c}, nil)
	defer g.Close()
	g.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set(gateway.TokenHeader, "t0k3n")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := get("/api/v1/sandbox/ports/port/8080/index.html")
		if status == 200 && body == "inside the sandbox\n" {
			break
		}
		if status != 502 || time.Now().After(deadline) {
			t.Fatalf("GET through the gateway = %d %q", status, body)
		}
		time.Sleep(50 * time.Millisecond) // httpd still starting
	}
	if status, body := get("/api/v1/sandbox/ports/port/8081/"); status != 502 || !strings.Contains(body, "refused") {
		t.Errorf("GET of a closed sandbox port = %d %q, want 502 connection refused", status, body)
	}
}
