package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/run"
)

// registerLoops registers the daemon's background loops with s.Loops. None
// is critical: each only falls behind while it waits to restart, so a
// failure is logged and the loop restarted rather than the daemon
// stopped. (Prepull tasks and the manager's sandbox starts are not loops:
// each is work a request started, bounded by its own timeout, and the
// service that started it waits for it in Close.)
//
// The loops that act on every daemon's records (the sweep, the warm
// pools' refills, the session reaper, the LLM archive's and the task
// runs' retention) run only on the leader among the daemons sharing the
// store (leaderOnly); the others run on every daemon: the LLM keys' usage
// counted here, the notifications of its LLM archive's index, the task
// runs this daemon claimed and its files of runs removed, the images of
// this host.
func (s *System) registerLoops() {
	// Campaigns for leadership; logs this daemon's role as it changes.
	s.Loops.Go("leader election", s.Leader.Run)
	// Expires sandboxes and notices dead ones; a restart resumes at the
	// next tick.
	s.Loops.Go("sandbox sweep", s.leaderOnly(func(ctx context.Context) error {
		s.Manager.Run(ctx)
		return ctx.Err()
	}))
	// One loop per warm pool, so that a pool that fails does not hold up
	// the others; its ready sandboxes stay in it across a restart.
	for _, name := range s.Pools.Names() {
		s.Loops.Go("warm pool "+name, s.leaderOnly(func(ctx context.Context) error { return s.Pools.Fill(ctx, name) }))
	}
	// Ends idle and over-age sessions and reaps orphans; a restart resumes
	// at the next period.
	s.Loops.Go("session reaper", s.leaderOnly(func(ctx context.Context) error {
		s.Sessions.Run(ctx)
		return ctx.Err()
	}))
	// Writes the LLM keys' usage to the store; the hot path only counts
	// in memory. On a shared store, every second, reading back the
	// usage of the other daemons (gate.WithSharedStore).
	usageEvery := 5 * time.Second
	if s.KeyLocks != nil {
		usageEvery = time.Second
	}
	s.Loops.Go("llm key usage", func(ctx context.Context) error { return s.LLM.Maintain(ctx, usageEvery) })
	// Removes what the LLM archive keeps past its limits. On a shared
	// store the leader applies them to every daemon's exchanges (and
	// indexes what stopped daemons left), and each daemon removes its own
	// old log segments.
	if s.KeyLocks == nil {
		s.Loops.Go("llm archive retention", s.leaderOnly(func(ctx context.Context) error {
			return s.LLMArchive.RunRetention(ctx, time.Minute, s.LLMArchive.Sweep)
		}))
	} else {
		s.Loops.Go("llm archive retention", s.leaderOnly(func(ctx context.Context) error {
			return s.LLMArchive.RunRetention(ctx, time.Minute, s.LLMArchive.SweepShared)
		}))
		s.Loops.Go("llm archive log segments", func(ctx context.Context) error {
			return s.LLMArchive.RunRetention(ctx, time.Minute, s.LLMArchive.Sweep)
		})
	}
	// Wakes the LLM exchange stream's follows when any daemon of the
	// store indexed exchanges.
	s.Loops.Go("llm index notifications", func(ctx context.Context) error {
		return s.llmIndex.relay(ctx, s.Notes, s.log)
	})
	// Carries out submitted task runs; at its first start it ends the runs
	// a previous daemon left (failed, "daemon restarted"). Runs in flight
	// when it stops are left to that recovery.
	s.Loops.Go("task runs", s.Runs.Run)
	// Removes the runs past their retention, every daemon's records, and
	// on every daemon its files of the runs removed by another.
	s.Loops.Go("task run retention", s.leaderOnly(func(ctx context.Context) error {
		return s.Runs.RunRetention(ctx, run.DefaultRetentionInterval, s.Runs.Expire)
	}))
	s.Loops.Go("task run files", func(ctx context.Context) error {
		return s.Runs.RunRetention(ctx, run.DefaultRetentionInterval, s.Runs.RemoveOrphans)
	})
	s.registerPrebuild()
}

// leaderOnly returns loop run so that it runs while this daemon leads, its
// context ending when the leadership does, and waits while it follows.
func (s *System) leaderOnly(run func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error { return s.Leader.WhileLeader(ctx, run) }
}

// recover re-adopts the sandboxes and resumes the prepulls a previous
// daemon left, when this daemon is the first of its store to start: it
// takes the leadership now (leader.Elector.TryLead). A daemon joining
// others that share the store recovers nothing: the sandboxes being made,
// and the warm pools, that recovery cleans up are theirs. The runtime
// serves recovered sandboxes the daemon's services from here on: every
// part is built.
func (s *System) recover(ctx context.Context) error {
	first, err := s.Leader.TryLead(ctx)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	if !first {
		s.log.Info("another daemon of the store leads: what a previous daemon left is its to recover")
		return nil
	}
	if err := s.Manager.Recover(ctx); err != nil {
		return err
	}
	return s.Prepull.Recover(ctx)
}

// Serve answers API requests on l, and serves the console on its listener
// when it has one, with the background loops running, until ctx is done or
// a critical loop fails. Then it shuts down: it stops accepting connections, waits for the requests in flight (up to the
// shutdown timeout, then ends them), stops the loops and waits for them,
// and empties the warm pools. Sandboxes keep running and are re-adopted
// next start. It returns nil after a shutdown that ctx asked for; the
// caller then calls Close.
func (s *System) Serve(ctx context.Context, l net.Listener) error {
	srv := httpapi.NewServer(s.cfg.HTTP, s.API.Handler(), s.log)
	if s.llmExchanges != nil {
		// Follows of the LLM archive never end on their own: the drain
		// would wait the whole shutdown timeout for them.
		srv.RegisterOnShutdown(s.llmExchanges.EndFollows)
	}
	// The loops run until the requests have drained: a request may wait
	// on what a loop does.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	loops := make(chan error, 1)
	go func() { loops <- s.Loops.Run(loopCtx) }()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(httpapi.LimitListener(l, s.cfg.HTTP, s.log)) }()
	url := clientURL(l.Addr())
	s.log.Info("serving", "addr", l.Addr().String(), "url", url, "data_dir", s.cfg.DataDir, "runtime", s.Runtime.Name())
	if url != client.DefaultURL {
		s.log.Info("the CLI and the SDKs reach this daemon with AGENT2ENV_URL=" + url + " (or the CLI's --url)")
	}
	stopConsole := s.serveConsole()

	var err error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	case err = <-served:
		served = nil
		err = fmt.Errorf("serve: %w", err)
		s.log.Error("shutting down: the API server failed", "err", err)
	case err = <-loops:
		loops = nil
		s.log.Error("shutting down: a critical loop failed", "err", err)
	}
	s.API.SetReady(false)
	stopConsole()
	s.drain(srv, served)
	stopLoops()
	s.stopLoops(loops)
	s.emptyPools()
	s.log.Info("shut down")
	return err
}

// drain stops srv and the sandboxes' channels accepting and waits for
// their requests in flight (a sandbox's model call, as an API client's),
// up to the shutdown timeout, then ends those still running; served is
// srv.Serve's result (nil when it has been received). A sandbox that
// connects meanwhile finds its channel gone and waits for the next
// daemon (the agent's forwarders do).
func (s *System) drain(srv *http.Server, served <-chan error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	channels := make(chan int, 1)
	go func() { channels <- s.channels.servers.shutdown(ctx) }()
	if err := srv.Shutdown(ctx); err != nil {
		s.log.Warn("requests still running at the shutdown timeout: ending them", "err", err)
		srv.Close()
	}
	if n := <-channels; n > 0 {
		s.log.Warn("sandboxes' requests still running at the shutdown timeout: ended them", "channels", n)
	}
	if served != nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("serve", "err", err)
		}
	}
}

// stopLoops waits, up to the shutdown timeout, for the supervisor's Run to
// return its result on loops (nil when it has been received), once its
// context has ended.
func (s *System) stopLoops(loops <-chan error) {
	if loops == nil {
		return
	}
	t := time.NewTimer(s.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case err := <-loops:
		if err != nil {
			s.log.Error("background loops", "err", err)
		}
	case <-t.C:
		s.log.Error("background loops still running at the shutdown timeout: leaving them", "loops", s.Loops.Running())
	}
}

// emptyPools deletes the sandboxes waiting in warm pools: they are
// nobody's and go with the daemon (Recover deletes any a crash left).
func (s *System) emptyPools() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.Pools.Close(ctx); err != nil {
		s.log.Warn("empty warm pools", "err", err)
	}
}

// Close closes the services in the reverse order of New: background work
// first (prepull tasks, sandbox starts), the store last, so that what
// still runs can record how it ended. Sandboxes keep running. It returns
// the store's error on closing, which says whether the database was left
// clean.
func (s *System) Close() error {
	if s.Prepull != nil {
		s.Prepull.Close()
	}
	if s.Manager != nil {
		s.Manager.Close()
	}
	if s.Gateway != nil {
		s.Gateway.Close()
	}
	if c, ok := s.Runtime.(interface{ Close() }); ok && s.cfg.runtime == nil {
		c.Close() // egress proxies; sandboxes keep running
	}
	if s.LLMArchive != nil {
		s.LLMArchive.Close() // what it has left to index, before the store closes
	}
	if s.Leader != nil {
		s.Leader.Close() // a leadership taken at start that Serve never took over
	}
	if s.presence != nil {
		s.presence.Unlock()
	}
	if s.Store != nil {
		if err := s.Store.Close(); err != nil {
			return errors.Join(fmt.Errorf("close the store: %w", err), s.unlockDataDir())
		}
	}
	return s.unlockDataDir()
}

// clientURL is the URL a client on this machine reaches the API at, when
// served at addr: on the loopback address for an unspecified one.
func clientURL(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ap.Addr().IsUnspecified() {
		ap = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port())
	}
	return "http://" + ap.String()
}

// unlockDataDir lets go of the data dir, last, once nothing writes in it.
func (s *System) unlockDataDir() error {
	if s.dataDir == nil {
		return nil
	}
	f := s.dataDir
	s.dataDir = nil
	return f.Close()
}
