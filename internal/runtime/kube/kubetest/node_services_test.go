package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestNodeServices checks that the processes of a real Pod reach the
// daemon's services at 127.0.0.1:4000 and its egress proxy at
// 127.0.0.1:3128 (through HTTP_PROXY), known by their sandbox, with the
// daemon reaching the Pod on its IP or through the kubelet's port-forward.
// The answers end with the daemon's side closing: the kubelet passes that
// on.
func TestNodeServices(t *testing.T) {
	n := StartNode(t, NodeOptions{})
	agentImage, testImage := n.SelfImage(t), n.RuntimetestImage(t)
	owner := newOwner()
	for _, connect := range []string{kube.ConnectDirect, kube.ConnectPortForward} {
		t.Run(connect, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rt, err := kube.New(ctx, kube.Config{
				Rest: n.Config, Namespace: ns, Owner: owner, AgentImage: agentImage, Connect: connect,
				StartTimeout: 2 * time.Minute, Services: answerServices{}, Egress: answerEgress{},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			id := "svc-" + connect
			sp := &sandbox.Spec{ID: id, Image: testImage, Network: sandbox.Network{
				Egress: &sandbox.Egress{AllowedDomains: []string{"example.com"}},
			}}
			if err := rt.Create(ctx, sp); err != nil {
				t.Fatal(err)
			}
			defer rt.Delete(context.Background(), id)
			if err := rt.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			c, err := rt.Agent(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var out, stderr strings.Builder
			// busybox's wget ignores no_proxy: -Y off for the services.
			script := `wget -Y off -q -O - "$AGENT2ENV_LLM_URL/v1/models" && wget -q -O - http://example.com/page`
			res, err := c.Exec(ctx, agent.ExecRequest{Shell: script, Timeout: time.Minute}, nil, &out, &stderr)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %+v, %v; stderr %s", res, err, stderr.String())
			}
			want := "services of " + id + ": /llm/v1/models\negress GET example.com under [example.com]\n"
			if out.String() != want {
				t.Errorf("output %q, want %q", out.String(), want)
			}
		})
	}
}

// answerServices answers every request with the sandbox it was served to.
type answerServices struct{}

func (answerServices) ServeSandbox(ctx context.Context, l net.Listener, id string) error {
	return serveAnswers(ctx, l, func(r *http.Request) string { return "services of " + id + ": " + r.URL.Path })
}

// answerEgress answers every proxy request with the policy it was served
// under.
type answerEgress struct{}

func (answerEgress) Serve(ctx context.Context, l net.Listener, policy netproxy.Policy) error {
	return serveAnswers(ctx, l, func(r *http.Request) string {
		return fmt.Sprintf("egress %s %s under %v", r.Method, r.Host, policy.Domains)
	})
}

// serveAnswers serves answer's line to every request on l until ctx ends,
// closing each connection after its answer.
func serveAnswers(ctx context.Context, l net.Listener, answer func(*http.Request) string) error {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		fmt.Fprintln(w, answer(r))
	})}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
