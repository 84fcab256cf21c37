package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
)

// netnsChild marks the run of the test binary inside the network
// namespace a test made for it.
const netnsChild = "AGENT2ENV_NETPROXY_NETNS_CHILD"

// inNewNetns runs the test named by t again in a child process in a new
// network namespace, where it may change addresses freely, and reports
// whether this is that child.
func inNewNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsChild) == t.Name() {
		return true
	}
	runtimetest.RequiresRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), netnsChild+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("in a new network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("the test in a new network namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not run in the new network namespace")
	}
	return false
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// A sandbox allowed the internet must not reach the daemon's host through
// one of the host's own addresses that is no loopback or private one (a
// public address: the daemon's API and every host service listen there).
// The test runs in a network namespace of its own whose lo carries
// 198.18.0.1, an address the guard does not otherwise refuse.
func TestGuardRefusesHostAddresses(t *testing.T) {
	if !inNewNetns(t) {
		return
	}
	ip(t, "link", "set", "lo", "up")
	ip(t, "addr", "add", "198.18.0.1/32", "dev", "lo")
	api, err := net.Listen("tcp", "198.18.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	go http.Serve(api, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the daemon's API")
	}))
	_, port, _ := net.SplitHostPort(api.Addr().String())
	proxy, _ := serve(t, Config{}, Policy{AllowAll: true})

	// connect asks the proxy for a tunnel to host and returns the status.
	connect := func(host string) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", proxy.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		target := net.JoinHostPort(host, port)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, "(a tunnel)"
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, string(b)
	}
	if code, body := connect("198.18.0.1"); code != http.StatusForbidden || !strings.Contains(body, "an address of this host") {
		t.Errorf("CONNECT to the host's address = %d %q, want 403 naming the host", code, body)
	}
	resp, err := proxyClient(t, proxy).Get("http://198.18.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), "daemon's API") {
		t.Errorf("GET through the host's address = %d %q, want 403", resp.StatusCode, b)
	}

	// An address the host does not have is not refused (here it has no
	// route: 502), until the host gains it.
	if code, body := connect("198.18.0.3"); code != http.StatusBadGateway {
		t.Errorf("CONNECT to another address = %d %q, want 502", code, body)
	}
	ip(t, "addr", "add", "198.18.0.3/32", "dev", "lo")
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := connect("198.18.0.3")
		if code == http.StatusForbidden && strings.Contains(body, "an address of this host") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CONNECT to an address the host gained = %d %q, still not refused after 10s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
