package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// fakeServices answers every request with the sandbox it was served to,
// and counts the sandboxes it serves at the moment.
type fakeServices struct{ serving atomic.Int64 }

func (f *fakeServices) ServeSandbox(ctx context.Context, l net.Listener, id string) error {
	f.serving.Add(1)
	defer f.serving.Add(-1)
	return serveHTTP(ctx, l, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "services of %s: %s\n", id, r.URL.Path)
	})
}

// fakeEgress answers every proxy request with the policy it was served
// under.
type fakeEgress struct{ serving atomic.Int64 }

func (f *fakeEgress) Serve(ctx context.Context, l net.Listener, policy netproxy.Policy) error {
	f.serving.Add(1)
	defer f.serving.Add(-1)
	return serveHTTP(ctx, l, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "egress %s %s under %v\n", r.Method, r.Host, policy.Domains)
	})
}

func serveHTTP(ctx context.Context, l net.Listener, h http.HandlerFunc) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// TestServices checks that a sandbox's processes reach the daemon's
// services and egress proxy at their addresses in the sandbox, known by
// the sandbox they are in, with the daemon reaching the Pods directly or
// through port-forward; and that Stop and Delete stop serving.
//
// Tier A's agents share the host's network namespace, so each listens on
// its Pod's IP (the emulated kubelet moves the addresses there) and the
// processes connect to that instead of 127.0.0.1: the rest of the path —
// the Pod's environment, the agent's listener, the daemon's accept
// requests over real TCP or the API server — is the real one. Tier B
// (TestNodeServices) connects to 127.0.0.1:4000 in a real Pod.
func TestServices(t *testing.T) {
	k := startTierA(t)
	for _, connect := range []string{kube.ConnectDirect, kube.ConnectPortForward} {
		t.Run(connect, func(t *testing.T) {
			svc, egress := &fakeServices{}, &fakeEgress{}
			rt := k.runtimeWith(t, kube.Config{Connect: connect, Services: svc, Egress: egress})
			if !rt.Capabilities().NetworkPolicy {
				t.Error("a runtime with an egress proxy lacks NetworkPolicy")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ids := []string{"svc-a-" + connect, "svc-b-" + connect}
			for i, id := range ids {
				sp := &sandbox.Spec{ID: id, Image: testImage}
				if i == 0 {
					sp.Network.Egress = &sandbox.Egress{AllowedDomains: []string{"example.com"}}
				}
				if err := rt.Create(ctx, sp); err != nil {
					t.Fatal(err)
				}
				defer rt.Delete(context.Background(), id)
				if err := rt.Start(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			for i, id := range ids {
				ip := k.pod(ctx, t, id).Status.PodIP
				// Many at once: more than the requests the daemon keeps
				// waiting.
				// HTTP/1.1, the answer read by its length, the client
				// closing: kwok's port-forward, unlike a kubelet's, never
				// passes on a close from the daemon's side.
				script := fmt.Sprintf(`get() {
  exec 3<>/dev/tcp/%[1]s/$1 || return
  printf '%%s HTTP/1.1\r\nHost: x\r\n\r\n' "$2" >&3
  len=0
  while IFS= read -r line <&3; do
    line=${line%%$'\r'}
    [ -z "$line" ] && break
    case $line in Content-Length:*) len=${line#*: } ;; esac
  done
  head -c "$len" <&3
  exec 3>&-
}
echo "$AGENT2ENV_LLM_URL $HTTP_PROXY"
for i in $(seq 12); do get 4000 'GET /llm/v1/models' & done
wait
get 3128 'GET http://example.com/' 2>/dev/null || echo "no egress"
`, ip)
				out := execOut(ctx, t, rt, id, script)
				proxy := "http://" + agent.EgressAddr
				egressLine := "egress GET example.com under [example.com]"
				if i == 1 {
					proxy, egressLine = "", "no egress"
				}
				want := "http://" + agent.ServicesAddr + "/llm " + proxy + "\n" +
					strings.Repeat("services of "+id+": /llm/v1/models\n", 12) + egressLine + "\n"
				if out != want {
					t.Errorf("sandbox %s: output\n%s\nwant\n%s", id, out, want)
				}
			}
			if n := svc.serving.Load(); n != 2 {
				t.Errorf("services served to %d sandboxes, want 2", n)
			}
			if err := rt.Stop(ctx, ids[0], time.Second); err != nil {
				t.Fatal(err)
			}
			if n, m := svc.serving.Load(), egress.serving.Load(); n != 1 || m != 0 {
				t.Errorf("after Stop: services served to %d sandboxes, egress to %d; want 1, 0", n, m)
			}
			if err := rt.Delete(ctx, ids[1]); err != nil {
				t.Fatal(err)
			}
			if n := svc.serving.Load(); n != 0 {
				t.Errorf("after Stop and Delete: services served to %d sandboxes, want 0", n)
			}
		})
	}
}

// execOut runs script in sandbox id and returns its output.
func execOut(ctx context.Context, t *testing.T, rt sandbox.Runtime, id, script string) string {
	t.Helper()
	c, err := rt.Agent(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out, stderr strings.Builder
	res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"bash", "-c", script}, Timeout: time.Minute}, nil, &out, &stderr)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec in %s: %+v, %v; stderr %s", id, res, err, stderr.String())
	}
	return out.String()
}
