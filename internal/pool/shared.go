package pool

import (
	"context"
	"errors"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/store"
)

// Option configures Pools.
type Option func(*Pools)

// Lister is what pools on a shared store read of it: the pooled
// sandboxes, which are every daemon's.
type Lister interface {
	ListSandboxPage(ctx context.Context, f store.SandboxFilter, p store.Page) ([]*store.Sandbox, string, error)
	CountSandboxes(ctx context.Context, f store.SandboxFilter) (int, error)
}

// WithSharedStore makes the pools those of every daemon of st, a store
// several daemons share: a pool's ready sandboxes are its records in st,
// not a list in this daemon, so any daemon claims any of them (the claim
// is one conditional update of the record, which one daemon wins) and
// finds its kernel by asking its agent; the daemon that fills the pools
// (the leader) counts them in st every sharedCheck, so it refills what
// the others claimed; and Close leaves them to the daemons that remain.
func WithSharedStore(st Lister) Option { return func(p *Pools) { p.shared = st } }

// sharedCheck is how often a filling pool on a shared store counts its
// sandboxes: what another daemon claimed is refilled within it.
const sharedCheck = time.Second

// sharedTake bounds the pooled sandboxes a take tries, when others claim
// the first ones first.
const sharedTake = 8

// readyFilter selects the sandboxes ready in pool name.
func readyFilter(name string) store.SandboxFilter {
	return store.SandboxFilter{Pool: name, Statuses: []string{string(api.StatusRunning)}}
}

// sharedSize counts the sandboxes of wp in the store, ready or being
// made, and keeps the count for Stats.
func (p *Pools) sharedSize(ctx context.Context, wp *warmPool) (int, error) {
	n, err := p.shared.CountSandboxes(ctx, store.SandboxFilter{Pool: wp.spec.Name,
		Statuses: []string{string(api.StatusPending), string(api.StatusRunning)}})
	if err != nil {
		return 0, err
	}
	wp.mu.Lock()
	wp.seen = n
	wp.mu.Unlock()
	return n, nil
}

// fillShared keeps one pool at its size, counted in the store.
func (p *Pools) fillShared(ctx context.Context, wp *warmPool) {
	delay := time.Second
	tick := time.NewTicker(sharedCheck)
	defer tick.Stop()
	for {
		n, err := p.sharedSize(ctx, wp)
		for ; err == nil && n < wp.spec.Size && ctx.Err() == nil; n++ {
			gen := wp.generation()
			var e entry
			if e, err = p.make(ctx, wp.spec); err == nil {
				delay = time.Second
				wp.mu.Lock()
				stale := wp.gen != gen
				if !stale {
					wp.made = e.sandbox
				}
				wp.mu.Unlock()
				if stale { // the template changed as it was made
					p.retire(context.WithoutCancel(ctx), wp, []entry{e})
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			p.log.Warn("warm pool: make sandbox", "pool", wp.spec.Name, "err", err, "retry_in", delay)
			delay = wp.backOff(ctx, delay)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-wp.refill:
		case <-tick.C:
		}
	}
}

// readyShared is every sandbox ready in wp in the store (none if the
// store failed, which is logged).
func (p *Pools) readyShared(ctx context.Context, wp *warmPool) []entry {
	sbs, _, err := p.shared.ListSandboxPage(ctx, readyFilter(wp.spec.Name), store.Page{})
	if err != nil {
		p.log.Warn("warm pool: list ready sandboxes", "pool", wp.spec.Name, "err", err)
	}
	out := make([]entry, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, entry{sandbox: sb})
	}
	return out
}

// firstReady is the oldest sandbox of template version version ready in
// wp in the store, among the first sharedTake (those a take tries); nil
// when none is (or the store failed).
func (p *Pools) firstReady(ctx context.Context, wp *warmPool, version int) *store.Sandbox {
	sbs, _, err := p.shared.ListSandboxPage(ctx, readyFilter(wp.spec.Name), store.Page{Limit: sharedTake})
	if err != nil {
		return nil
	}
	for _, sb := range sbs {
		if sb.TemplateVersion == version {
			return sb
		}
	}
	return nil
}

// takeShared claims a sandbox ready in wp in the store, of template
// version version (anyVersion: whichever), as c says, and finds its
// kernel. A sandbox another daemon claimed first, or of another version,
// is passed over; a claim refused for what c asks ends the take.
func (p *Pools) takeShared(ctx context.Context, wp *warmPool, version int, c manager.Claim) (entry, bool) {
	sbs, _, err := p.shared.ListSandboxPage(ctx, readyFilter(wp.spec.Name), store.Page{Limit: sharedTake})
	if err != nil {
		p.log.Warn("warm pool: list ready sandboxes", "pool", wp.spec.Name, "err", err)
	}
	for _, cand := range sbs {
		if version != anyVersion && cand.TemplateVersion != version {
			continue
		}
		sb, err := p.mgr.Claim(ctx, cand.ID, c)
		switch {
		case errors.Is(err, errdefs.ErrInvalidArgument):
			return entry{}, false
		case errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound):
			continue // claimed by another daemon meanwhile, or gone
		case err != nil:
			p.log.Warn("warm pool: claim sandbox", "pool", wp.spec.Name, "sandbox", cand.ID, "err", err)
			continue
		}
		e := entry{sandbox: sb}
		if wp.spec.Language != "" {
			e.kernel = p.kernelOf(ctx, sb.ID)
		}
		return e, true
	}
	return entry{}, false
}

// kernelOf is the kernel the pool started in sandbox id, asked of its
// agent: the one it runs ("" when it runs none, or the agent fails: a
// warm sandbox all the same).
func (p *Pools) kernelOf(ctx context.Context, id string) string {
	ac, err := p.mgr.Agent(ctx, id)
	if err != nil {
		p.log.Warn("warm pool: kernel of a claimed sandbox", "sandbox", id, "err", err)
		return ""
	}
	ks, err := ac.Kernels(ctx)
	if err != nil || len(ks) == 0 {
		if err != nil {
			p.log.Warn("warm pool: kernel of a claimed sandbox", "sandbox", id, "err", err)
		}
		return ""
	}
	return ks[0].ID
}
