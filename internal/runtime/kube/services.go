package kube

import (
	"context"
	"sync"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// acceptIdle is how many accept requests the daemon keeps waiting in a
// running sandbox's agent per address: that many connections the sandbox
// makes at once are taken at once, the next after a round trip. Each
// costs a connection and two goroutines in the daemon, for every running
// sandbox.
const acceptIdle = 2

// serve serves the daemon's services (Config.Services) and, for a sandbox
// with egress, the egress proxy (Config.Egress) to sandbox id from now
// until unserve, through its agent's accept addresses: the daemon dials
// the agent, whether on the Pod's IP or through port-forward, and the
// sandbox never dials out. The channel is the sandbox's identity. What
// fails (the agent not answering yet, a Pod being replaced) is retried
// until unserve. A sandbox already served stays as it is.
func (r *Runtime) serve(id string, egress *sandbox.Egress) {
	if r.cfg.Services == nil && (egress == nil || r.cfg.Egress == nil) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	r.mu.Lock()
	if _, served := r.serving[id]; served {
		r.mu.Unlock()
		cancel()
		return
	}
	r.serving[id] = func() {
		cancel()
		wg.Wait()
	}
	wg.Add(1) // before anyone can stop it
	r.mu.Unlock()
	log := r.log.With("sandbox", id)
	go func() {
		defer wg.Done()
		c, err := r.Agent(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("serve the daemon's services to sandbox", "err", err)
			}
			return
		}
		// The client is the runtime's, one per Pod: Delete closes it.
		var served sync.WaitGroup
		on := func(name string, serve func(context.Context, *agent.Listener) error) {
			l := c.Listen(name, acceptIdle, log)
			served.Go(func() {
				defer l.Close()
				if err := serve(ctx, l); err != nil && ctx.Err() == nil {
					log.Warn("serve "+name+" to sandbox", "err", err)
				}
			})
		}
		if r.cfg.Services != nil {
			on(agent.AcceptServices, func(ctx context.Context, l *agent.Listener) error {
				return r.cfg.Services.ServeSandbox(ctx, l, id)
			})
		}
		if egress != nil && r.cfg.Egress != nil {
			policy := netproxy.Policy{AllowAll: egress.AllowInternet, Domains: egress.AllowedDomains}
			on(agent.AcceptEgress, func(ctx context.Context, l *agent.Listener) error {
				return r.cfg.Egress.Serve(ctx, l, policy)
			})
		}
		served.Wait()
	}()
}

// unserve stops serving sandbox id, if it is served, and ends the
// connections it accepted.
func (r *Runtime) unserve(id string) {
	r.mu.Lock()
	stop := r.serving[id]
	delete(r.serving, id)
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// unserveAll stops serving every sandbox.
func (r *Runtime) unserveAll() {
	r.mu.Lock()
	stops := r.serving
	r.serving = map[string]func(){}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
}
