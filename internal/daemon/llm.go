package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/llm/config"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/runtime"
)

// ReloadLLM reads the LLM configuration file again and serves it from now
// on; calls in flight finish on the configuration they started on. On
// error (the file names the line) the current configuration stays.
func (s *System) ReloadLLM() error {
	if s.cfg.LLMConfig == "" {
		return errors.New("reload llm config: the daemon was started without --llm-config")
	}
	return applyLLMConfig(s.cfg, s.LLM, s.LLMArchive, s.llmClient)
}

// applyLLMConfig reads cfg's LLM configuration file and serves it on g,
// every exchange recorded into a and every upstream called with client.
func applyLLMConfig(cfg Config, g *gate.Gate, a *archive.Archive, client *http.Client) error {
	f, err := config.Load(cfg.LLMConfig)
	if err != nil {
		return err
	}
	pc, err := f.Proxy(os.Getenv)
	if err != nil {
		return err
	}
	if err := g.Apply(pc, f.Limits, append(llmProxyOptions(a), proxy.WithHTTPClient(client))...); err != nil {
		return fmt.Errorf("llm config %s: %w", cfg.LLMConfig, err)
	}
	cfg.Log.Info("llm proxy configured", "file", cfg.LLMConfig, "providers", len(pc.Providers), "models", len(pc.Models))
	return nil
}

// sandboxServices serves the daemon's services to each sandbox on its own
// channel (runtime.Services): the sandbox is known by the channel, not by
// anything its requests say. limit bounds the channels' connections, all
// together and each sandbox's; servers holds the channels' servers, which
// the daemon's shutdown drains as it drains the API's.
type sandboxServices struct {
	s       *System
	limit   *httpapi.ChannelLimit
	servers *serverSet
}

// newSandboxServices returns the services of s to its sandboxes under the
// bounds of s's configuration.
func newSandboxServices(s *System) sandboxServices {
	return sandboxServices{s, httpapi.NewChannelLimit(s.cfg.HTTP, s.log), &serverSet{}}
}

var _ runtime.Services = sandboxServices{}

// ServeSandbox implements runtime.Services. The sandbox is a client like
// any other: its connections have the API's timeouts (an idle one is
// closed after Config.HTTP's IdleTimeout) and header bound, and its
// channel the per-client bound of connections (Config.HTTP's
// MaxConnsPerClient) within the sandboxes' shared MaxConns.
func (v sandboxServices) ServeSandbox(ctx context.Context, l net.Listener, id string) error {
	srv := httpapi.NewServer(v.s.cfg.HTTP, v.s.sandboxHandler(id), v.s.log)
	v.servers.add(srv)
	defer v.servers.remove(srv)
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(v.limit.Listener(l)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// sandboxHandler is what sandbox id finds at http://127.0.0.1:4000: the
// LLM proxy under /llm and the MCP server at /mcp, both told the caller.
// Sandboxes are served from Recover on, at the end of New, when every
// service exists.
func (s *System) sandboxHandler(id string) http.Handler {
	// The run is the one the task runner carries out in the sandbox: known
	// to the daemon, never taken from anything the sandbox or its creator
	// says.
	run := func(context.Context) string {
		r, _ := s.Runs.RunOfSandbox(id)
		return r
	}
	mux := http.NewServeMux()
	mux.Handle(gate.Prefix+"/", s.LLM.SandboxHandler(gate.Prefix, id, s.belongs(id)))
	mcp := s.MCP.Handler()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		ctx := caller.WithCaller(r.Context(), caller.Caller{Sandbox: id, Run: run(r.Context())})
		mcp.ServeHTTP(w, r.WithContext(ctx))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		errdefs.WriteHTTP(w, errdefs.NotFound("no agent2env service at %s: the LLM proxy is under /llm, MCP at /mcp", r.URL.Path))
	})
	return mux
}

// belongs is what sandbox id's model calls belong to (gate.Belongs): the
// run it is made for — its own, or, for a sandbox made on a run's
// sandbox's behalf (store.Sandbox.Owner: a session or context its agent
// made), its owner's — and that run's tenant (store.Run.Tenant): the
// exchanges are the tenant's, as the run is, and other API keys do not
// reach them. A sandbox of no run has no tenant: its exchanges are every
// key's, as the sandbox is. Neither a sandbox's owner nor a run's tenant
// ever changes: each is read from the store once.
func (s *System) belongs(id string) gate.Belongs {
	var (
		mu      sync.Mutex
		owner   *string
		tenants = map[string]string{} // by run
	)
	return func(ctx context.Context) (string, string, error) {
		run, _ := s.Runs.RunOfSandbox(id)
		if run == "" {
			mu.Lock()
			o := owner
			mu.Unlock()
			if o == nil {
				sb, err := s.Store.GetSandbox(ctx, id)
				if err != nil {
					return "", "", fmt.Errorf("find the owner of sandbox %s: %w", id, err)
				}
				o = &sb.Owner
				mu.Lock()
				owner = o
				mu.Unlock()
			}
			if *o != "" {
				run, _ = s.Runs.RunOfSandbox(*o)
			}
		}
		if run == "" {
			return "", "", nil
		}
		mu.Lock()
		tenant, ok := tenants[run]
		mu.Unlock()
		if !ok {
			r, err := s.Store.GetRun(ctx, run)
			if err != nil {
				return "", "", fmt.Errorf("find the tenant of run %s: %w", run, err)
			}
			tenant = r.Tenant
			mu.Lock()
			tenants[run] = tenant
			mu.Unlock()
		}
		return run, tenant, nil
	}
}

// serverSet is the servers of the sandboxes' channels that are serving.
type serverSet struct {
	mu      sync.Mutex
	servers map[*http.Server]bool
}

func (ss *serverSet) add(srv *http.Server) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.servers == nil {
		ss.servers = map[*http.Server]bool{}
	}
	ss.servers[srv] = true
}

func (ss *serverSet) remove(srv *http.Server) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.servers, srv)
}

// shutdown shuts every server of ss down at once, each waiting for its
// requests in flight until ctx ends, then closing its connections; it
// returns how many it had to close so. A server added meanwhile is left
// to its own end (the runtime's).
func (ss *serverSet) shutdown(ctx context.Context) int {
	ss.mu.Lock()
	all := slices.Collect(maps.Keys(ss.servers))
	ss.mu.Unlock()
	var (
		wg     sync.WaitGroup
		closed atomic.Int32
	)
	for _, srv := range all {
		wg.Go(func() {
			if srv.Shutdown(ctx) != nil {
				srv.Close()
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(closed.Load())
}
