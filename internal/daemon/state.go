package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/keyedlock"
	"github.com/agent2env/agent2env/internal/leader"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/runtime"
	_ "github.com/agent2env/agent2env/internal/runtime/all" // registers the runtimes
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/postgres"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// state is what the daemon keeps across restarts, and what runs
// sandboxes.
type state struct {
	Store recordStore
	// Leader elects, among the daemons sharing Store, the one that runs
	// the loops that must run once (registerLoops).
	Leader *leader.Elector
	// Notes carries notifications between the daemons sharing Store:
	// the events of the runs each carries out.
	Notes store.Notifier
	// KeyLocks locks keys of a space (sessions, kernels) among the
	// daemons sharing Store; nil when Store is one daemon's, whose
	// locks in memory suffice.
	KeyLocks func(space string) keyedlock.Remote
	// KeyLeases is KeyLocks for keys taken often, held long or nested
	// (sandboxes), which hold no connection and can be tried without
	// waiting; nil with KeyLocks.
	KeyLeases func(space string) keyedlock.TryRemote
	// presence is held, on a store daemons may share, while the daemon
	// runs (holdPresence).
	presence leader.Held
	// dataDir holds the data dir's lock (lockDataDir).
	dataDir *os.File
	Images  *image.Store
	Runtime sandbox.Runtime
}

// openState opens the store and the image store under cfg's directories
// and builds the runtime, which serves each sandbox the daemon's services
// through svc. On error it returns what it opened, for Close.
func openState(ctx context.Context, cfg Config, svc runtime.Services) (st state, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return st, fmt.Errorf("create data dir: %w", err)
	}
	if st.dataDir, err = lockDataDir(cfg.DataDir, cfg.Listen); err != nil {
		return st, err
	}
	var sh sharing
	if st.Store, sh, err = openStore(ctx, cfg); err != nil {
		return st, err
	}
	if cfg.wrapStore != nil {
		st.Store = cfg.wrapStore(st.Store)
	}
	st.Leader, st.Notes, st.KeyLocks, st.KeyLeases = leader.New(sh.lock, cfg.Log), sh.notes, sh.keyLocks, sh.keyLeases
	if sh.presence != nil {
		if st.presence, err = holdPresence(ctx, cfg, sh.presence); err != nil {
			return st, err
		}
	}
	if st.Images, err = openImages(cfg); err != nil {
		return st, err
	}
	st.Runtime, err = buildRuntime(ctx, cfg, st.Images, svc)
	return st, err
}

// recordStore is what the daemon keeps its records in: every backend of
// package store, which also keeps the LLM proxy's per-run keys.
type recordStore interface {
	store.Store
	gate.KeyStore
	// Ping checks that the store answers (readiness).
	Ping(ctx context.Context) error
}

// readyChecks are what the API's /readyz checks on st besides recovery:
// the store, and the cluster of a runtime that has one (kubernetes). A
// replica that loses either leaves its Service's endpoints.
func readyChecks(st state) []httpapi.ReadyCheck {
	checks := []httpapi.ReadyCheck{{Name: "store", Check: st.Store.Ping}}
	if p, ok := st.Runtime.(interface{ Ping(context.Context) error }); ok {
		checks = append(checks, httpapi.ReadyCheck{Name: "cluster", Check: p.Ping})
	}
	return checks
}

// sharing is how the daemons of one store work together: the lock they
// elect their leader with, the notifications between them, the lock each
// holds while it runs (presence: shared, or exclusive with alone) and the
// locks of keys (all three nil: the store is one daemon's anyway, as
// its data dir's lock makes sure).
type sharing struct {
	lock      leader.Lock
	notes     store.Notifier
	presence  func(alone bool) leader.Lock
	keyLocks  func(space string) keyedlock.Remote
	keyLeases func(space string) keyedlock.TryRemote
}

// openStore opens the store cfg.Store names, and returns it with how its
// daemons share it: "" or "sqlite", the SQLite file <DataDir>/state.db,
// which one daemon owns, and so always leads and notifies itself only; a
// postgres:// or postgresql:// URL, that PostgreSQL database, whose
// daemons elect a leader and notify each other.
func openStore(ctx context.Context, cfg Config) (recordStore, sharing, error) {
	switch s := cfg.Store; {
	case s == "" || s == "sqlite":
		st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "state.db"))
		if err != nil {
			return nil, sharing{}, err // not a nil *sqlite.Store in a recordStore
		}
		return st, sharing{lock: leader.Always{}, notes: &store.LocalNotifier{}}, nil
	case strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://"):
		st, err := postgres.Open(ctx, s)
		if err != nil {
			return nil, sharing{}, err
		}
		return st, sharing{lock: st.Leadership(), notes: st, presence: st.Daemons, keyLocks: st.KeyLocks,
			keyLeases: st.KeyLeases}, nil
	}
	return nil, sharing{}, fmt.Errorf("store %q: want sqlite or a PostgreSQL URL (postgres://user@host:5432/database)", postgres.Redact(cfg.Store))
}

// holdPresence takes the lock every daemon on a store others may share
// holds while it runs: shared with the other daemons, unless the
// daemon's runtime keeps its sandboxes on its machine (oci), which then
// must be the store's only daemon. Such a daemon sees only its own
// sandboxes, so among others one leader's sweep would fail the others'
// sandboxes as lost; so it is refused while any other daemon runs, and
// any daemon while it runs.
func holdPresence(ctx context.Context, cfg Config, lock func(alone bool) leader.Lock) (leader.Held, error) {
	alone := cfg.Runtime != kube.Name
	h, err := lock(alone).TryLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime %s on store %s: %w", cfg.Runtime, postgres.Redact(cfg.Store), err)
	}
	if h != nil {
		return h, nil
	}
	if !alone {
		return nil, fmt.Errorf("runtime %s: a daemon with a runtime of its own machine (such as oci) uses store %s, "+
			"and owns every sandbox of it; stop it, or give this daemon a store of its own: "+
			"several daemons on one store all need --runtime %s", cfg.Runtime, postgres.Redact(cfg.Store), kube.Name)
	}
	others := "another daemon with a runtime of its own machine uses"
	if h, err := lock(false).TryLock(ctx); err == nil && h != nil { // only shared holders: kubernetes daemons
		h.Unlock()
		others = "other daemons (--runtime " + kube.Name + ") use"
	}
	return nil, fmt.Errorf("runtime %s: %s store %s, and runtime %s keeps its sandboxes on this machine, "+
		"so its daemon must be its store's only one: stop the others, or give this daemon a store of its own; "+
		"several daemons on one store all need --runtime %s", cfg.Runtime, others, postgres.Redact(cfg.Store), cfg.Runtime, kube.Name)
}

// openImages opens the image store of cfg.ImageDir.
func openImages(cfg Config) (*image.Store, error) {
	opts := []image.Option{image.WithLogger(cfg.Log)}
	if cfg.CacheDir != "" {
		opts = append(opts, image.WithCacheDir(cfg.CacheDir))
	}
	if cfg.DebianMirror != "" {
		opts = append(opts, image.WithMirror(cfg.DebianMirror))
	}
	if len(cfg.InsecureRegistries) > 0 {
		opts = append(opts, image.WithInsecureRegistries(cfg.InsecureRegistries...))
	}
	return image.Open(cfg.ImageDir, opts...)
}

// buildRuntime returns the runtime cfg names, its state in
// <DataDir>/<Runtime>, or the one cfg was given.
func buildRuntime(ctx context.Context, cfg Config, images *image.Store, svc runtime.Services) (sandbox.Runtime, error) {
	if cfg.runtime != nil {
		return cfg.runtime, nil
	}
	settings := maps.Clone(cfg.RuntimeSettings)
	if settings == nil {
		settings = map[string]string{}
	}
	if cfg.RuntimeBinary != "" {
		settings["oci.binary"] = cfg.RuntimeBinary
	}
	return runtime.New(ctx, cfg.Runtime, runtime.Options{
		Root: filepath.Join(cfg.DataDir, cfg.Runtime), Images: images, Settings: settings, Logger: cfg.Log, Services: svc,
		// Sandboxes whose template opts into network access reach it only
		// through this proxy, which enforces their allowed domains.
		Egress: netproxy.New(netproxy.Config{Logger: cfg.Log}),
	})
}
