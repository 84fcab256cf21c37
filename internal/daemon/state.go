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
	// (sandboxes), which hold no connection; nil with KeyLocks.
	KeyLeases func(space string) keyedlock.Remote
	// hostRuntime is held, on a shared store, by the daemon whose
	// runtime keeps its sandboxes on its machine (holdHostRuntime).
	hostRuntime leader.Held
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
	st.Leader, st.Notes, st.KeyLocks, st.KeyLeases = leader.New(sh.lock, cfg.Log), sh.notes, sh.keyLocks, sh.keyLeases
	if sh.hostRuntime != nil && cfg.Runtime != kube.Name {
		if st.hostRuntime, err = holdHostRuntime(ctx, cfg, sh.hostRuntime); err != nil {
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
// elect their leader with, the notifications between them, the lock
// of the one daemon whose runtime is its machine's and the locks of
// keys (both nil: the store is one daemon's anyway).
type sharing struct {
	lock        leader.Lock
	notes       store.Notifier
	hostRuntime leader.Lock
	keyLocks    func(space string) keyedlock.Remote
	keyLeases   func(space string) keyedlock.Remote
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
		return st, sharing{lock: st.Leadership(), notes: st, hostRuntime: st.HostRuntime(), keyLocks: st.KeyLocks,
			keyLeases: st.KeyLeases}, nil
	}
	return nil, sharing{}, fmt.Errorf("store %q: want sqlite or a PostgreSQL URL (postgres://user@host:5432/database)", postgres.Redact(cfg.Store))
}

// holdHostRuntime takes lock, which the daemon holds while it runs, for a
// runtime that keeps its sandboxes on this machine (oci) on a store other
// daemons may share: each such daemon sees only its own sandboxes, and
// the leader's sweep would fail every other's as dead. A second one is
// refused; daemons sharing a store run the kubernetes runtime.
func holdHostRuntime(ctx context.Context, cfg Config, lock leader.Lock) (leader.Held, error) {
	h, err := lock.TryLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime %s on a shared store: %w", cfg.Runtime, err)
	}
	if h == nil {
		return nil, fmt.Errorf("runtime %s: another daemon with a runtime of its own machine uses store %s: "+
			"such a runtime keeps its sandboxes on one machine, so one daemon owns them all; "+
			"several daemons on one store need --runtime %s", cfg.Runtime, postgres.Redact(cfg.Store), kube.Name)
	}
	return h, nil
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
