package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/netguard"
	"github.com/agent2env/agent2env/internal/pool"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/template"
)

// services are the domain services and the service layer's sandbox view,
// over the state.
type services struct {
	Metrics   *metrics.Metrics
	Prepull   *prepull.Service
	Templates *template.Service
	Manager   *manager.Manager
	// Sandboxes is the API's view of the manager, for the surfaces and
	// the task runner.
	Sandboxes *service.Sandboxes
	Pools     *pool.Pools
	Contexts  *contexts.Service
	Sessions  *session.Service
	// LLMArchive records every exchange through the LLM proxy and gives
	// runs their tokens.
	LLMArchive *archive.Archive
	// llmIndex is the archive as the API reads it, its follows woken by
	// every daemon of the store.
	llmIndex *sharedIndex
	// Runs runs tasks; the LLM proxy reports a run's model calls to it
	// (run.Service.Progress).
	Runs *run.Service
	// LLM serves the LLM proxy at /llm and to every sandbox; LLMKeys are
	// its per-run keys.
	LLM       *gate.Gate
	LLMKeys   *gate.Keys
	llmClient *http.Client // every configuration's upstream calls
}

// buildServices builds the services over st, each after what it uses. On
// error it returns what it built, for Close.
func buildServices(ctx context.Context, cfg Config, st state) (svc services, err error) {
	// Template file sources are fetched by the daemon: they must not lead
	// to its own API, the host's services or a cloud metadata service.
	sources, err := template.SourceGuard(cfg.FetchAllow)
	if err != nil {
		return svc, fmt.Errorf("fetch allow-list: %w", err)
	}
	svc.Metrics = metrics.New()
	// The warm pools, built after the templates, retire the sandboxes of
	// a template that changed; the hook finds them when called.
	var pools *pool.Pools
	svc.Prepull, svc.Templates = buildCatalog(cfg, st, sources, func(ctx context.Context, name string) {
		if pools != nil {
			pools.TemplateChanged(ctx, name)
		}
	})
	// A sandbox's LLM keys are revoked when it is deleted; the hook
	// finds the keys, built after the manager, when called.
	var llmKeys atomic.Pointer[gate.Keys]
	removed := func(ctx context.Context, id string) {
		if k := llmKeys.Load(); k != nil {
			if err := k.SandboxGone(ctx, id); err != nil {
				cfg.Log.Warn("revoke the llm keys of a deleted sandbox", "sandbox", id, "err", err)
			}
		}
	}
	if svc.Manager, svc.Pools, err = buildSandboxes(cfg, st, sources, svc.Templates, svc.Metrics, removed); err != nil {
		return svc, err
	}
	pools = svc.Pools
	sandboxOpts := []service.SandboxesOption{service.WithRuntime(st.Runtime)}
	if u, ok := st.Runtime.(sandbox.UsageReader); ok { // the runner's liveness counts CPU time where the runtime measures it
		sandboxOpts = append(sandboxOpts, service.WithUsage(u))
	}
	sandboxOpts = append(sandboxOpts, service.WithContextRecords(st.Store)) // snapshots and forks carry contexts
	svc.Sandboxes = service.NewSandboxes(svc.Manager, cfg.PublicURL, sandboxOpts...)
	if svc.Contexts, svc.Sessions, err = buildCode(cfg, st, svc.Manager, svc.Pools, svc.Metrics); err != nil {
		return svc, err
	}
	if err := svc.Metrics.Register(svc.Manager, svc.Pools, svc.Contexts, svc.Sessions); err != nil {
		return svc, err
	}
	// The archive opens before the runner, which takes the tokens of its
	// runs from it, re-indexing what a killed daemon left unindexed.
	acfg := archive.Config{Dir: cfg.LLMArchive.Dir, MaxAge: cfg.LLMArchive.MaxAge, MaxSize: cfg.LLMArchive.MaxSize, Log: cfg.Log}
	if b, ok := st.Store.(store.LLMBodies); ok && st.KeyLocks != nil { // a store other daemons share
		acfg.Bodies = b
	}
	if svc.LLMArchive, err = archive.Open(ctx, acfg, st.Store); err != nil {
		return svc, err
	}
	svc.llmIndex = newSharedIndex(svc.LLMArchive)
	// The runner lists the LLM proxy's models and the proxy tells the
	// runner of its calls: the runner comes first, and finds the proxy
	// when it lists models, never before New has built it.
	var llm *gate.Gate
	if svc.Runs, err = run.New(run.Config{Dir: filepath.Join(cfg.DataDir, "runs"), TasksDir: cfg.TasksDir, MaxParallel: cfg.MaxRuns,
		MaxAge: cfg.RunMaxAge, Models: func() []string { return llm.Models() }},
		svc.Sandboxes, st.Store, cfg.Log, run.WithLLMUsage(svc.LLMArchive), run.WithNotifier(st.Notes)); err != nil {
		return svc, err
	}
	svc.LLM, svc.LLMKeys, svc.llmClient, err = buildLLM(cfg, st, svc.Runs, svc.Manager, svc.LLMArchive, svc.Metrics)
	llm = svc.LLM
	llmKeys.Store(svc.LLMKeys)
	return svc, err
}

// buildCatalog builds the template and prepull services. They use each
// other, each in one direction at construction and the other only while
// serving: a template asks for its image to be prepulled, and a prepull
// may name a template, resolved by a func that finds the template service
// when called. changed is told of every template changed (template
// WithChangeHook).
func buildCatalog(cfg Config, st state, sources *netguard.Guard, changed func(ctx context.Context, name string)) (*prepull.Service, *template.Service) {
	// Where nodes pull images themselves (a cluster), prepulls go to them.
	var pulls prepull.Images = st.Images
	if np, ok := st.Runtime.(sandbox.NodePrepuller); ok {
		pulls = prepull.NodeImages(np)
	}
	var templates *template.Service
	pp := prepull.New(st.Store, pulls, cfg.Log, prepull.WithTemplates(prepull.TemplateResolverFunc(
		func(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
			return templates.Resolve(ctx, name, version)
		})))
	templates = template.New(st.Store, template.WithPrepuller(pp), template.WithLogger(cfg.Log),
		template.WithSourceGuard(sources), template.WithChangeHook(changed))
	return pp, templates
}

// buildSandboxes builds the manager and the warm pools. They use each
// other: warm pools create through the manager, and the manager's creates
// take from the pools, found by a func when called. Template file sources
// are fetched within sources. removed is told of every sandbox deleted.
func buildSandboxes(cfg Config, st state, sources *netguard.Guard, templates *template.Service, m *metrics.Metrics,
	removed func(ctx context.Context, id string)) (*manager.Manager, *pool.Pools, error) {
	var pools *pool.Pools
	mopts := []manager.Option{manager.WithTemplates(templates), manager.WithMetrics(m), manager.WithRemoved(removed),
		manager.WithFetcher(netguard.NewFetcher(netguard.FetchConfig{Guard: sources})),
		manager.WithWarmPool(manager.WarmPoolFunc(func(ctx context.Context, req manager.CreateRequest) (*store.Sandbox, bool) {
			return pools.TakeSandbox(ctx, req)
		}))}
	if st.KeyLeases != nil { // a store other daemons share
		mopts = append(mopts, manager.WithSharedLocks(st.KeyLeases("sandbox"), st.KeyLeases("sandbox maker")))
	}
	mgr := manager.New(cfg.Manager, st.Runtime, st.Store, cfg.Log, mopts...)
	var opts []pool.Option
	if st.KeyLocks != nil { // a store other daemons share
		opts = append(opts, pool.WithSharedStore(st.Store))
	}
	pools, err := pool.New(mgr, pool.Specs(cfg.WarmPools, cfg.Contexts.Defaults), cfg.Log, opts...)
	return mgr, pools, err
}

// buildCode builds the code-interpreter contexts and the sessions over
// them. A context's session_name is a session: the one edge back, given
// here, in plain sight.
func buildCode(cfg Config, st state, mgr *manager.Manager, pools *pool.Pools, m *metrics.Metrics) (*contexts.Service, *session.Service, error) {
	// Buffered output of commands and of code counts against one budget.
	cfg.Contexts.Outputs = mgr.OutputBudget()
	ctxs := contexts.New(cfg.Contexts, mgr, st.Store, pools, cfg.Log, contexts.WithMetrics(m))
	opts := []session.Option{session.WithWarmPools(func() []api.WarmPool {
		var out []api.WarmPool
		for _, p := range pools.Stats() {
			out = append(out, api.WarmPool{Name: p.Name, Ready: p.Ready, Size: p.Size, Hits: p.Hits, Misses: p.Misses})
		}
		return out
	})}
	if u, ok := st.Runtime.(sandbox.UsageReader); ok { // optional: a runtime may not measure usage
		opts = append(opts, session.WithUsage(u))
	}
	if st.KeyLocks != nil {
		opts = append(opts, session.WithSharedLocks(st.KeyLocks("session"), st.KeyLocks("session kernel")))
	}
	sess, err := session.New(cfg.Sessions, mgr, st.Store, ctxs, cfg.Log, opts...)
	if err != nil {
		return nil, nil, err
	}
	ctxs.SetSessions(sess)
	return ctxs, sess, nil
}

// buildLLM builds the LLM gate and its per-run keys, and applies the LLM
// configuration file when there is one. Its calls are the runner's
// liveness, and every exchange goes to the archive. A key names a run of
// runs and a sandbox of sbs.
func buildLLM(cfg Config, st state, runs *run.Service, sbs *manager.Manager, a *archive.Archive, m *metrics.Metrics) (*gate.Gate, *gate.Keys, *http.Client, error) {
	kopts := []gate.KeysOption{gate.WithRuns(runs), gate.WithSandboxes(sbs)}
	var usage store.LLMUsage
	if st.KeyLocks != nil { // a store other daemons share
		kopts = append(kopts, gate.WithSharedStore())
		usage, _ = st.Store.(store.LLMUsage)
	}
	keys := gate.NewKeys(st.Store, kopts...)
	gm := gate.NewMetrics()
	if err := m.Register(gm); err != nil {
		return nil, keys, nil, err
	}
	client := proxy.NewClient()
	// One daemon's budgets of sandboxes and runs start, after a restart,
	// from what its archive's index holds; a shared store's from Usage.
	g := gate.New(gate.Config{APIKeys: cfg.apiKeys(), Keys: keys, Metrics: gm, Progress: runs.Progress, Usage: usage,
		Spent: st.Store, Log: cfg.Log})
	if cfg.LLMConfig == "" {
		return g, keys, client, nil
	}
	return g, keys, client, applyLLMConfig(cfg, g, a, client)
}
