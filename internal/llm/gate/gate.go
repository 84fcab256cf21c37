// Package gate is the daemon's side of the LLM proxy: the door every call
// to /llm passes. It knows who calls (a sandbox by the channel its request
// came on, a per-run key, or an operator with an API key), puts that in
// the request's context (package caller), refuses what is past a budget or
// rate limit with a 429 in the client's own wire format, counts tokens and
// latency for /metrics, and serves the current proxy, which Apply swaps
// atomically: calls in flight finish on the proxy they started on.
//
// Keys are the per-run LLM keys (made, listed and revoked through the
// REST API, kept as hashes). A Gate is safe for concurrent use.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
)

// Limits are the default budgets and rate limits. A key's own limits
// replace Key field by field.
type Limits struct {
	Key     Limit `yaml:"key"`
	Sandbox Limit `yaml:"sandbox"`
	Run     Limit `yaml:"run"`
}

// Config configures a Gate.
type Config struct {
	// APIKeys, when non-nil, are the daemon's API keys: a call from
	// outside a sandbox must present one of them, or a per-run key. Nil
	// means the API is open (loopback only) and such calls are the
	// operator's.
	APIKeys *auth.Keys
	Keys    *Keys
	Metrics *Metrics // nil: nothing counted
	// Progress, when set, is told that a sandbox's or a run's call is
	// progress: when it starts, every ProgressEvery while it goes on, and
	// when it ends (the task runner's liveness). It must be cheap.
	Progress func(caller.Caller)
	// Usage, when set, is the store several daemons share: the rate
	// limits and the budgets of sandboxes and runs count every daemon's
	// calls, shared at each Maintain interval (a key's budget is its
	// Keys'). Nil counts this daemon's calls only.
	Usage store.LLMUsage
	// Spent, when set (and Usage is not), is where the budget of a
	// sandbox or a run starts the first time the gate counts it (after a
	// restart, or once its idle count was forgotten): the tokens the
	// archive's index holds of its exchanges. Nil starts from zero.
	Spent Spent
	Log   *slog.Logger
}

// Spent sums the tokens of the exchanges a filter selects;
// store.LLMExchanges implements it.
type Spent interface {
	LLMTokens(ctx context.Context, f store.LLMExchangeFilter) (int64, error)
}

// ProgressEvery is how often Config.Progress hears of a call in flight.
const ProgressEvery = time.Second

// Gate serves /llm. Make one with New.
type Gate struct {
	cfg     Config
	current atomic.Pointer[state] // nil until Apply
	limiter *limiter
}

// state is one configuration, swapped whole.
type state struct {
	proxy  *proxy.Proxy
	limits Limits
	models []string // the model names clients may ask for
}

// New returns a Gate without a proxy: until Apply, calls are answered
// that the proxy is not configured.
func New(cfg Config) *Gate {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Gate{cfg: cfg, limiter: newLimiter()}
}

// Apply builds a proxy of pc (with opts) and serves it from now on, with
// limits. Calls in flight finish on the proxy they started on. On error
// the current proxy stays.
func (g *Gate) Apply(pc proxy.Config, limits Limits, opts ...proxy.Option) error {
	opts = append([]proxy.Option{proxy.WithObserver(g.observe), proxy.WithAdmitter(g.admit)}, opts...)
	p, err := proxy.New(pc, opts...)
	if err != nil {
		return err
	}
	models := make([]string, 0, len(pc.Models))
	for _, m := range pc.Models {
		models = append(models, m.Name)
	}
	g.current.Store(&state{proxy: p, limits: limits, models: models})
	return nil
}

// Models returns the model names of the configuration served (in its
// order), nil while there is none.
func (g *Gate) Models() []string {
	if st := g.current.Load(); st != nil {
		return st.models
	}
	return nil
}

// Prefix is where the daemon serves the proxy: OpenAI SDKs take
// <daemon>/llm/v1 as their base URL, Anthropic and Google GenAI SDKs
// <daemon>/llm.
const Prefix = "/llm"

// Register serves Handler at Prefix on mux (a route group of the daemon's
// API).
func (g *Gate) Register(mux *http.ServeMux) { mux.Handle(Prefix+"/", g.Handler(Prefix)) }

// Configured reports whether a proxy is served.
func (g *Gate) Configured() bool { return g.current.Load() != nil }

// Handler serves /llm for callers outside sandboxes: the proxy's paths
// below the prefix, a key required as described at Config.APIKeys.
func (g *Gate) Handler(prefix string) http.Handler {
	return http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := g.authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agent2env"`)
			// A per-run key that is not (or no longer) valid is an
			// agent's call refused: archived, as every call is, but with
			// nothing of what no valid key sent (its body is not read).
			if st := g.current.Load(); st != nil && strings.HasPrefix(presentedKey(r), KeyPrefix) {
				st.proxy.Refuse(w, r, llm.AsError(err))
				return
			}
			proxy.WriteError(w, r, llm.AsError(err))
			return
		}
		g.serve(w, r, c)
	}))
}

// Belongs says what a sandbox's calls belong to: the run they are made
// for and that run's tenant (caller.Caller's Run and Tenant; empty when
// none). An error refuses the call: its exchanges' owner is not known.
type Belongs func(ctx context.Context) (run, tenant string, err error)

// SandboxHandler serves /llm to sandbox id, on its own channel: every
// call is the sandbox's, whatever key it presents (a per-run key it
// presents counts against that key as well), and, as belongs (when not
// nil) says, its run's and its run's tenant's.
func (g *Gate) SandboxHandler(prefix, id string, belongs Belongs) http.Handler {
	return http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := caller.Caller{Sandbox: id}
		if belongs != nil {
			var err error
			if c.Run, c.Tenant, err = belongs(r.Context()); err != nil {
				proxy.WriteError(w, r, llm.AsError(err))
				return
			}
		}
		if k := presentedKey(r); strings.HasPrefix(k, KeyPrefix) && g.cfg.Keys != nil {
			if rec, err := g.cfg.Keys.Authenticate(r.Context(), k); err == nil {
				c.Key = rec.ID
				if c.Run == "" {
					c.Run, c.Tenant = rec.Run, rec.Tenant
				}
			}
		}
		g.serve(w, r, c)
	}))
}

// presentedKey is the key of a request, wherever its SDK put it.
func presentedKey(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	for _, h := range []string{"x-api-key", "x-goog-api-key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return r.URL.Query().Get("key")
}

var errNoKey = errors.New("an API key or a per-run LLM key is required (Authorization: Bearer, x-api-key or x-goog-api-key)")

// authenticate is the caller of a request from outside any sandbox.
func (g *Gate) authenticate(r *http.Request) (caller.Caller, error) {
	k := presentedKey(r)
	if strings.HasPrefix(k, KeyPrefix) && g.cfg.Keys != nil {
		rec, err := g.cfg.Keys.Authenticate(r.Context(), k)
		if err != nil {
			return caller.Caller{}, err
		}
		return caller.Caller{Key: rec.ID, Sandbox: rec.Sandbox, Run: rec.Run, Tenant: rec.Tenant}, nil
	}
	if g.cfg.APIKeys == nil {
		return caller.Caller{}, nil
	}
	if k == "" {
		return caller.Caller{}, llm.Errorf(llm.ErrorAuthentication, "%s", errNoKey)
	}
	if err := g.cfg.APIKeys.Check("Bearer " + k); err != nil {
		return caller.Caller{}, llm.Errorf(llm.ErrorAuthentication, "%v", err)
	}
	return caller.Caller{Tenant: auth.Tenant(k)}, nil
}

// errNotConfigured answers calls while no proxy is configured: a 404, as
// for a model not configured, so that SDKs do not retry it.
var errNotConfigured = &llm.Error{Kind: llm.ErrorNotFound,
	Message: "the LLM proxy of this agent2env daemon has no configuration: start it with serve --llm-config FILE (or AGENT2ENV_LLM_CONFIG)"}

func (g *Gate) serve(w http.ResponseWriter, r *http.Request, c caller.Caller) {
	st := g.current.Load()
	if st == nil {
		proxy.WriteError(w, r, errNotConfigured)
		return
	}
	if g.cfg.Progress != nil && (c.Sandbox != "" || c.Run != "") {
		defer g.busy(c)()
	}
	st.proxy.ServeHTTP(w, r.WithContext(caller.WithCaller(r.Context(), c)))
}

// busy tells Progress of c's call now, every ProgressEvery while it goes
// on (a slow model, streaming or not, is progress) and when it ends (the
// returned func). A timer, no goroutine, while it waits.
func (g *Gate) busy(c caller.Caller) (done func()) {
	g.cfg.Progress(c)
	var (
		mu    sync.Mutex
		ended bool
		t     *time.Timer
	)
	mu.Lock()
	t = time.AfterFunc(ProgressEvery, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			g.cfg.Progress(c)
			t.Reset(ProgressEvery)
		}
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		ended = true
		t.Stop()
		mu.Unlock()
		g.cfg.Progress(c)
	}
}

// scopes are what c's calls count against, with their limits.
func (g *Gate) scopes(st *state, c caller.Caller) []scope {
	var out []scope
	if c.Key != "" && g.cfg.Keys != nil {
		l := st.limits.Key
		if rec := g.cfg.Keys.record(c.Key); rec != nil {
			l = Limit{RequestsPerMinute: rec.RequestsPerMinute, TokensPerMinute: rec.TokensPerMinute, BudgetTokens: rec.BudgetTokens}.or(l)
		}
		out = append(out, scope{kind: "key", id: c.Key, limit: l})
	}
	if c.Sandbox != "" {
		out = append(out, scope{kind: "sandbox", id: c.Sandbox, limit: st.limits.Sandbox})
	}
	if c.Run != "" {
		out = append(out, scope{kind: "run", id: c.Run, limit: st.limits.Run})
	}
	return out
}

// used holds the stored usage of c's key, where its count starts.
func (g *Gate) used(c caller.Caller) map[string]int64 {
	if c.Key == "" || g.cfg.Keys == nil {
		return nil
	}
	return map[string]int64{c.Key: g.cfg.Keys.used(c.Key)}
}

// admit admits a call (proxy.Admitter) against its caller's limits, and
// reserves its estimate of their budgets until observe settles it. A
// refusal is answered, archived and observed by the proxy; listing models
// is no call, and free.
func (g *Gate) admit(ctx context.Context, ex *proxy.Exchange, estimate int64) *llm.Error {
	st := g.current.Load()
	if st == nil { // the proxy calling is one Apply stored
		return nil
	}
	scopes, used := g.scopes(st, ex.Caller), g.used(ex.Caller)
	if err := g.restore(ctx, scopes, &used); err != nil {
		return llm.AsError(err)
	}
	if kind, e := g.limiter.admit(scopes, used, estimate); e != nil {
		g.cfg.Metrics.limit(kind)
		return e
	}
	ex.Reserved = estimate
	return nil
}

// restore adds to used, for each sandbox or run scope with a budget that
// the limiter has not counted yet, what the archive holds of its use
// (Config.Spent): a budget spent before a restart, or before its idle
// count was forgotten, stays spent. A scope is read once: the limiter
// counts it from then on.
func (g *Gate) restore(ctx context.Context, scopes []scope, used *map[string]int64) error {
	if g.cfg.Spent == nil || g.cfg.Usage != nil {
		return nil
	}
	for _, s := range g.limiter.uncounted(scopes) {
		if s.kind == "key" || s.limit.BudgetTokens <= 0 {
			continue
		}
		f := store.LLMExchangeFilter{SandboxID: s.id}
		if s.kind == "run" {
			f = store.LLMExchangeFilter{RunID: s.id}
		}
		n, err := g.cfg.Spent.LLMTokens(ctx, f)
		if err != nil {
			return fmt.Errorf("read the tokens %s %s used: %w", s.kind, s.id, err)
		}
		if *used == nil {
			*used = map[string]int64{}
		}
		(*used)[s.id] = n
	}
	return nil
}

// observe counts a finished exchange: it settles what admit reserved to
// the tokens used.
func (g *Gate) observe(ex *proxy.Exchange) {
	tokens := int64(ex.Usage.InputTokens + ex.Usage.OutputTokens)
	c := ex.Caller
	if st := g.current.Load(); st != nil && (tokens > 0 || ex.Reserved > 0) {
		g.limiter.settle(g.scopes(st, c), g.used(c), ex.Reserved, tokens)
		if c.Key != "" && g.cfg.Keys != nil {
			g.cfg.Keys.charge(c.Key, tokens)
		}
	}
	g.cfg.Metrics.observe(ex)
}

// Maintain syncs key usage with the store (Keys.Sync), shares the counts
// of the limits with the other daemons (Config.Usage) and forgets idle
// counts, every interval until ctx ends (then flushes once more): a
// supervisor loop.
func (g *Gate) Maintain(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			errs := []error{ctx.Err()}
			if g.cfg.Keys != nil {
				errs = append(errs, g.cfg.Keys.Flush(fctx))
			}
			if g.cfg.Usage != nil {
				errs = append(errs, g.limiter.share(fctx, g.cfg.Usage))
			}
			return errors.Join(errs...)
		case <-t.C:
		}
		if g.cfg.Keys != nil {
			if err := g.cfg.Keys.Sync(ctx); err != nil {
				g.cfg.Log.Warn("sync llm key usage", "err", err)
			}
		}
		if g.cfg.Usage != nil {
			if err := g.limiter.share(ctx, g.cfg.Usage); err != nil {
				g.cfg.Log.Warn("share llm usage with the other daemons", "err", err)
			}
		}
		g.limiter.prune(24*time.Hour, g.cfg.Usage != nil)
	}
}
