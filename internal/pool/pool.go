// Package pool keeps warm pools: per source (a template, or a language's
// default image), a configured number of running sandboxes with their
// default kernel already started, refilled in the background. A sandbox
// create or a context create that such a sandbox fits takes one instead of
// waiting for a cold start.
//
// Pooled sandboxes are ordinary records marked with their pool (hidden from
// listings, no expiry until claimed); Close deletes them, and the manager's
// Recover deletes any a crash left, so a pool never leaks. A pool of a
// template follows its versions: the sandboxes it holds when the template
// changes or is deleted are retired (TemplateChanged), and it refills with
// the latest version. The manager's
// Create asks the pools first (a func the daemon gives it), and refills
// are creates like any other, admitted against the same limits. Pools is
// also the Prometheus collector of the pools (ready, target, hits, misses).
package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// Manager is what a pool needs of the sandbox manager. A pooled sandbox
// is no one's until claimed: the manager's operations by id do not find
// it, so a pool reaches and deletes its own through PooledAgent and
// DeletePooled, and uses Agent once it has claimed one.
type Manager interface {
	CreatePooled(ctx context.Context, req manager.CreateRequest, pool string) (*store.Sandbox, error)
	Claim(ctx context.Context, id string, c manager.Claim) (*store.Sandbox, error)
	DeletePooled(ctx context.Context, id string) error
	PooledAgent(ctx context.Context, id string) (*agent.Client, error)
	Agent(ctx context.Context, id string) (*agent.Client, error)
}

// Spec is one warm pool.
type Spec struct {
	// Name is what requests ask for: a language (python, javascript, bash)
	// for the contexts service's default sandboxes, else a template name.
	Name string
	// Size is the number of sandboxes kept ready.
	Size int
	// Request is how a pooled sandbox is made (no overrides).
	Request manager.CreateRequest
	// Language is the kernel started in each sandbox ("" for none).
	Language string
}

// Pools is the set of warm pools. It is safe for concurrent use.
type Pools struct {
	mgr   Manager
	log   *slog.Logger
	pools map[string]*warmPool
	// shared, when set, is the store several daemons share, which holds
	// the pools' ready sandboxes (WithSharedStore).
	shared Lister

	wg sync.WaitGroup
	// stops tracks kernels of claimed sandboxes being stopped, off the
	// request path.
	stops sync.WaitGroup
}

// warmPool is one pool's state.
type warmPool struct {
	spec   Spec
	refill chan struct{}
	// changed wakes a fill waiting to retry after a failure: the template
	// changed (TemplateChanged).
	changed chan struct{}

	mu     sync.Mutex
	ready  []entry
	hits   uint64
	misses uint64
	// made is the last sandbox the pool made: its resources are every
	// one's (nil before the first).
	made *store.Sandbox
	// seen is, on a shared store, how many the pool had when last
	// counted.
	seen int
	// gen counts the changes of the pool's template: a sandbox made
	// while it changed is of the version before and is not kept.
	gen int
}

// entry is a ready sandbox and its kernel.
type entry struct {
	sandbox *store.Sandbox
	kernel  string
}

// retryMax bounds the back-off after a pool failed to make a sandbox.
const retryMax = 30 * time.Second

// New returns the pools of specs; Run fills them.
func New(mgr Manager, specs []Spec, log *slog.Logger, opts ...Option) (*Pools, error) {
	if log == nil {
		log = slog.Default()
	}
	p := &Pools{mgr: mgr, log: log, pools: make(map[string]*warmPool)}
	for _, o := range opts {
		o(p)
	}
	for _, s := range specs {
		if s.Name == "" || s.Size < 0 {
			return nil, fmt.Errorf("warm pool %q: a name and a size of 0 or more are required", s.Name)
		}
		if _, dup := p.pools[s.Name]; dup {
			return nil, fmt.Errorf("warm pool %q is configured twice", s.Name)
		}
		if s.Request.Overridden() {
			return nil, fmt.Errorf("warm pool %q: pooled sandboxes take no overrides", s.Name)
		}
		p.pools[s.Name] = &warmPool{spec: s, refill: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
		log.Info("warm pool", "pool", s.Name, "size", s.Size)
	}
	return p, nil
}

// Run fills every pool and refills what is taken until ctx is done.
func (p *Pools) Run(ctx context.Context) {
	for _, wp := range p.pools {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.fill(ctx, wp)
		}()
	}
	p.wg.Wait()
}

// Fill fills the pool named name and refills what is taken until ctx is
// done, then returns ctx's error: Run for one pool, so that a supervisor
// can run each pool as a loop of its own. Running it again after it
// failed keeps the sandboxes the pool has ready.
func (p *Pools) Fill(ctx context.Context, name string) error {
	wp, ok := p.pools[name]
	if !ok {
		return fmt.Errorf("fill warm pool %s: no such pool", name)
	}
	p.fill(ctx, wp)
	return ctx.Err()
}

// fill keeps one pool at its size.
func (p *Pools) fill(ctx context.Context, wp *warmPool) {
	if p.shared != nil {
		p.fillShared(ctx, wp)
		return
	}
	delay := time.Second
	for {
		for wp.size() < wp.spec.Size && ctx.Err() == nil {
			gen := wp.generation()
			e, err := p.make(ctx, wp.spec)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				p.log.Warn("warm pool: make sandbox", "pool", wp.spec.Name, "err", err, "retry_in", delay)
				delay = wp.backOff(ctx, delay)
				continue
			}
			delay = time.Second
			if !wp.keep(e, gen) {
				p.retire(context.WithoutCancel(ctx), wp, []entry{e})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wp.refill:
		}
	}
}

func (wp *warmPool) size() int {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return len(wp.ready)
}

func (wp *warmPool) generation() int {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return wp.gen
}

// keep adds e, made when the pool's generation was gen, to the ready
// sandboxes, unless the template changed meanwhile or the pool is full (a
// sandbox whose claim was refused came back as e was made).
func (wp *warmPool) keep(e entry, gen int) bool {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if wp.gen != gen || len(wp.ready) >= wp.spec.Size {
		return false
	}
	wp.ready, wp.made = append(wp.ready, e), e.sandbox
	return true
}

// putBack returns e, taken from the front of the ready sandboxes when the
// pool's generation was gen, to the front, unless the template changed
// meanwhile (e is of the version before) or the pool refilled its place.
func (wp *warmPool) putBack(e entry, gen int) bool {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if wp.gen != gen || len(wp.ready) >= wp.spec.Size {
		return false
	}
	wp.ready = append([]entry{e}, wp.ready...)
	return true
}

// backOff waits delay before a fill retries after a failure, or less if
// ctx ends or the template changes, and returns the next delay.
func (wp *warmPool) backOff(ctx context.Context, delay time.Duration) time.Duration {
	select {
	case <-ctx.Done():
	case <-time.After(delay):
	case <-wp.changed:
		return time.Second
	}
	return min(2*delay, retryMax)
}

// TemplateChanged retires what the pools of the template named name hold;
// call it once the template was made, given a new version or deleted.
// Their ready sandboxes are deleted (in the background: it returns at
// once), one being made as it changed is deleted once made, and they
// refill with the template as it now is (none while it does not exist).
func (p *Pools) TemplateChanged(ctx context.Context, name string) {
	for _, wp := range p.pools {
		if wp.spec.Request.Template != name {
			continue
		}
		wp.mu.Lock()
		stale := wp.ready
		wp.ready = nil
		wp.gen++
		wp.mu.Unlock()
		p.stops.Add(1)
		go func() {
			defer p.stops.Done()
			ctx := context.WithoutCancel(ctx)
			if p.shared != nil {
				stale = p.readyShared(ctx, wp)
			}
			p.retire(ctx, wp, stale)
			for _, ch := range []chan struct{}{wp.refill, wp.changed} {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}()
	}
}

// retire deletes sandboxes of wp that a change of its template left
// behind; one claimed meanwhile (on a shared store) is left to its owner.
func (p *Pools) retire(ctx context.Context, wp *warmPool, stale []entry) {
	for _, e := range stale {
		err := p.mgr.DeletePooled(ctx, e.sandbox.ID)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			p.log.Warn("warm pool: retire sandbox", "pool", wp.spec.Name, "sandbox", e.sandbox.ID, "err", err)
		}
	}
}

// make creates one pooled sandbox and starts its kernel.
func (p *Pools) make(ctx context.Context, s Spec) (entry, error) {
	sb, err := p.mgr.CreatePooled(ctx, s.Request, s.Name)
	if err != nil {
		return entry{}, err
	}
	e := entry{sandbox: sb}
	if s.Language == "" {
		return e, nil
	}
	id := contexts.NewID()
	ac, err := p.mgr.PooledAgent(ctx, sb.ID)
	if err == nil {
		_, err = ac.CreateKernel(ctx, agent.KernelSpec{ID: id, Language: s.Language, Cwd: sandbox.WorkDir})
	}
	var ae *agent.Error
	if errors.As(err, &ae) && ae.Code == "NO_INTERPRETER" {
		return e, nil // the image cannot run it: a warm sandbox all the same
	}
	if err != nil {
		_ = p.mgr.DeletePooled(context.WithoutCancel(ctx), sb.ID)
		return entry{}, fmt.Errorf("start %s kernel in warm sandbox %s: %w", s.Language, sb.ID, err)
	}
	e.kernel = id
	return e, nil
}

// anyVersion is the version take is given when any sandbox of the pool
// will do.
const anyVersion = -1

// take claims a ready sandbox of pool name, of template version version
// (anyVersion: whichever), as c says, counting a hit or a miss. A claim
// refused for what c asks leaves the sandbox ready.
func (p *Pools) take(ctx context.Context, name string, version int, c manager.Claim) (*warmPool, entry, bool) {
	wp, ok := p.pools[name]
	if !ok {
		return nil, entry{}, false
	}
	defer func() {
		select {
		case wp.refill <- struct{}{}:
		default:
		}
	}()
	if p.shared != nil {
		e, ok := p.takeShared(ctx, wp, version, c)
		wp.mu.Lock()
		if ok {
			wp.hits++
		} else {
			wp.misses++
		}
		wp.mu.Unlock()
		return wp, e, ok
	}
	for {
		wp.mu.Lock()
		if len(wp.ready) == 0 || (version != anyVersion && wp.ready[0].sandbox.TemplateVersion != version) {
			wp.misses++
			wp.mu.Unlock()
			return wp, entry{}, false
		}
		e, gen := wp.ready[0], wp.gen
		wp.ready = wp.ready[1:]
		wp.mu.Unlock()
		sb, err := p.mgr.Claim(ctx, e.sandbox.ID, c)
		if errors.Is(err, errdefs.ErrInvalidArgument) { // the claim's fault, not the sandbox's
			if !wp.putBack(e, gen) {
				p.retire(context.WithoutCancel(ctx), wp, []entry{e})
			}
			wp.mu.Lock()
			wp.misses++
			wp.mu.Unlock()
			return wp, entry{}, false
		}
		if err != nil { // it died waiting: drop it, try the next
			p.log.Warn("warm pool: drop sandbox", "pool", name, "sandbox", e.sandbox.ID, "err", err)
			_ = p.mgr.DeletePooled(context.WithoutCancel(ctx), e.sandbox.ID)
			continue
		}
		wp.mu.Lock()
		wp.hits++
		wp.mu.Unlock()
		e.sandbox = sb
		return wp, e, true
	}
}

// Take hands out a warm sandbox of the pool named source with its kernel,
// for the contexts service, claimed for owner (contexts.Pool).
func (p *Pools) Take(ctx context.Context, source, owner string) (contexts.Warm, bool) {
	wp, e, ok := p.take(ctx, source, anyVersion, manager.Claim{Owner: owner})
	if !ok {
		return contexts.Warm{}, false
	}
	return contexts.Warm{Sandbox: e.sandbox, KernelID: e.kernel, Language: wp.spec.Language}, true
}

// TakeSandbox hands out a warm sandbox that req would make, for a sandbox
// create: same image, or same template and version (req.TemplateVersion,
// which the manager resolves first: a pool never hands out a version
// other than the one asked for), and nothing else asked of it but the
// same cpu and memory (manager CreateRequest.Fits), claimed with the
// request's TTL and metadata. The kernel started for contexts is stopped.
func (p *Pools) TakeSandbox(ctx context.Context, req manager.CreateRequest) (*store.Sandbox, bool) {
	// matched is the last pool that serves req; its miss is counted here
	// unless a take, which counts its own, was tried.
	var (
		matched *warmPool
		tried   bool
	)
	for _, name := range p.Names() {
		wp := p.pools[name]
		r := wp.spec.Request
		if r.Template != req.Template || r.Image != req.Image || wp.spec.Size == 0 {
			continue
		}
		var serves, fits bool
		if p.shared != nil {
			// The oldest ready of the version, which a take claims
			// first, if no other daemon does.
			first := p.firstReady(ctx, wp, req.TemplateVersion)
			serves = first != nil && req.Fits(first)
			fits = serves
		} else {
			wp.mu.Lock()
			made := wp.made
			if made == nil {
				made = &store.Sandbox{}
			}
			serves = req.Fits(made)
			fits = serves && len(wp.ready) > 0 && req.TemplateVersion == wp.ready[0].sandbox.TemplateVersion
			wp.mu.Unlock()
		}
		if !serves {
			continue
		}
		matched = wp
		if !fits {
			continue
		}
		tried = true
		if _, e, ok := p.take(ctx, name, req.TemplateVersion, manager.Claim{Owner: req.ManagedBy, TTL: req.TTL, Metadata: req.Metadata}); ok {
			if e.kernel != "" {
				p.stops.Add(1)
				go func() {
					defer p.stops.Done()
					p.stopKernel(context.WithoutCancel(ctx), e)
				}()
			}
			return e.sandbox, true
		}
	}
	if matched != nil && !tried {
		matched.mu.Lock()
		matched.misses++
		matched.mu.Unlock()
	}
	return nil, false
}

// Names returns the pools' names, sorted.
func (p *Pools) Names() []string {
	out := make([]string, 0, len(p.pools))
	for name := range p.pools {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (p *Pools) stopKernel(ctx context.Context, e entry) {
	ac, err := p.mgr.Agent(ctx, e.sandbox.ID)
	if err == nil {
		err = ac.DeleteKernel(ctx, e.kernel)
	}
	if err != nil {
		p.log.Warn("warm pool: stop kernel of a claimed sandbox", "sandbox", e.sandbox.ID, "err", err)
	}
}

// Close deletes the sandboxes still waiting in the pools (on a shared
// store, none). Call it after Run (or every Fill) has returned.
func (p *Pools) Close(ctx context.Context) error {
	p.stops.Wait()
	if p.shared != nil {
		return nil // the other daemons' too: the last one's Recover deletes them
	}
	var errs []error
	for _, wp := range p.pools {
		wp.mu.Lock()
		ready := wp.ready
		wp.ready = nil
		wp.mu.Unlock()
		for _, e := range ready {
			if err := p.mgr.DeletePooled(ctx, e.sandbox.ID); err != nil {
				errs = append(errs, fmt.Errorf("delete warm sandbox %s: %w", e.sandbox.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Stats is one pool's state.
type Stats struct {
	Name         string
	Ready, Size  int
	Hits, Misses uint64
}

// Stats reports on every pool, by name.
func (p *Pools) Stats() []Stats {
	out := make([]Stats, 0, len(p.pools))
	for _, wp := range p.pools {
		wp.mu.Lock()
		ready := len(wp.ready)
		if p.shared != nil {
			ready = wp.seen
		}
		out = append(out, Stats{Name: wp.spec.Name, Ready: ready, Size: wp.spec.Size, Hits: wp.hits, Misses: wp.misses})
		wp.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// The pools' metrics, by pool name.
var (
	readyDesc  = prometheus.NewDesc("agent2env_pool_ready", "Sandboxes ready in the warm pool.", []string{"pool"}, nil)
	targetDesc = prometheus.NewDesc("agent2env_pool_target", "Sandboxes the warm pool keeps ready.", []string{"pool"}, nil)
	hitsDesc   = prometheus.NewDesc("agent2env_pool_hits_total", "Requests served from the warm pool.", []string{"pool"}, nil)
	missesDesc = prometheus.NewDesc("agent2env_pool_misses_total", "Requests the warm pool could not serve.", []string{"pool"}, nil)
)

var _ prometheus.Collector = (*Pools)(nil)

// Describe sends the descriptors of the pools' metrics
// (prometheus.Collector).
func (p *Pools) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{readyDesc, targetDesc, hitsDesc, missesDesc} {
		ch <- d
	}
}

// Collect sends each pool's metrics, read from its state when called
// (prometheus.Collector).
func (p *Pools) Collect(ch chan<- prometheus.Metric) {
	for _, s := range p.Stats() {
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(s.Ready), s.Name)
		ch <- prometheus.MustNewConstMetric(targetDesc, prometheus.GaugeValue, float64(s.Size), s.Name)
		ch <- prometheus.MustNewConstMetric(hitsDesc, prometheus.CounterValue, float64(s.Hits), s.Name)
		ch <- prometheus.MustNewConstMetric(missesDesc, prometheus.CounterValue, float64(s.Misses), s.Name)
	}
}

// Specs builds pool specs from sizes by name: a language's pool makes the
// contexts service's default sandbox for it, with its kernel; any other
// name is a template, whose sandboxes get a python kernel.
func Specs(sizes map[string]int, defaults map[string]contexts.Source) []Spec {
	var out []Spec
	for name, n := range sizes {
		s := Spec{Name: name, Size: n, Language: api.LanguagePython, Request: manager.CreateRequest{Template: name}}
		if src, ok := defaults[name]; ok {
			s.Language = name
			s.Request = manager.CreateRequest{Template: src.Template, Image: src.Image}
		}
		// The kernel the pool starts adopts the one the agent started as
		// it booted.
		s.Request.SpareKernel = s.Language
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
