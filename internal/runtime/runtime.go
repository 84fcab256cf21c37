// Package runtime is the registry of sandbox runtimes: each backend
// (runtime/oci, runtime/kube) registers a Factory under its
// name from an init function, and the daemon makes the one its
// configuration names with New. Backends are linked in by importing package
// runtime/all, where a build tag can leave each out (no_oci, no_kube).
//
// The package shares its name with the standard library's runtime, which
// the daemon's packages do not need; import it without renaming.
package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Factory makes a runtime from the daemon's options. It validates its
// settings, and returns an ErrInvalidArgument for a bad one.
type Factory func(ctx context.Context, opts Options) (sandbox.Runtime, error)

// Options are what the daemon gives every runtime. A runtime uses what it
// needs and ignores the rest.
type Options struct {
	// Root is a directory for the runtime's own state, <data-dir>/<name>.
	// The runtime creates it if it keeps state on the host.
	Root string
	// Images is the daemon's image store, for runtimes that unpack images
	// on this host.
	Images Images
	// Egress serves the daemon's egress proxy for sandboxes whose spec
	// sets Network.Egress; nil when the daemon has none.
	Egress EgressProxy
	// Services serves the daemon's in-sandbox services (LLM proxy, MCP)
	// to each sandbox on a channel of its own; nil when the daemon has
	// none. A runtime that cannot give sandboxes such a channel ignores it.
	Services Services
	// Settings are runtime-specific settings by "<runtime>.<key>"
	// ("oci.binary"). A runtime reads the keys with its own name as the
	// prefix and refuses those it does not know; the others are for other
	// runtimes, so one configuration can hold settings for several.
	Settings map[string]string
	Logger   *slog.Logger
}

// Images is what a runtime that unpacks images on this host needs of the
// image store; *image.Store implements it.
type Images interface {
	// Get returns the stored image, or an ErrNotFound.
	Get(ctx context.Context, ref string) (*image.Image, error)
	// Ensure returns the stored image, pulling or building it first if
	// needed; concurrent calls for one ref share the work.
	Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error)
}

var _ Images = (*image.Store)(nil)

// EgressProxy serves the egress proxy of one sandbox on l under policy
// until ctx is done, then closes l. *netproxy.Proxy implements it.
type EgressProxy interface {
	Serve(ctx context.Context, l net.Listener, policy netproxy.Policy) error
}

var _ EgressProxy = (*netproxy.Proxy)(nil)

// Services serves the daemon's services to sandbox id on l until ctx is
// done: every request on l is that sandbox's, which nothing inside it can
// change. The agent forwards the sandbox's agent.ServicesAddr to l.
type Services interface {
	ServeSandbox(ctx context.Context, l net.Listener, id string) error
}

var (
	mu        sync.Mutex
	factories = map[string]Factory{}
)

// Register makes a runtime available under name. It is meant for init
// functions and panics if name is empty or taken.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if name == "" || f == nil {
		panic("runtime: Register with an empty name or a nil factory")
	}
	if _, ok := factories[name]; ok {
		panic("runtime: " + name + " registered twice")
	}
	factories[name] = f
}

// Names returns the registered runtimes' names, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return slices.Sorted(maps.Keys(factories))
}

// New makes the runtime registered under name. An unknown name is an
// ErrInvalidArgument that lists the known ones.
func New(ctx context.Context, name string, opts Options) (sandbox.Runtime, error) {
	mu.Lock()
	f := factories[name]
	mu.Unlock()
	if f == nil {
		return nil, errdefs.Invalid("unknown runtime %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	rt, err := f(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	return rt, nil
}

// OwnSettings returns the settings of runtime name, without the prefix, or
// an ErrInvalidArgument naming one of its keys that is not in known.
func (opts Options) OwnSettings(name string, known ...string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range opts.Settings {
		key, ok := strings.CutPrefix(k, name+".")
		if !ok {
			continue
		}
		if !slices.Contains(known, key) {
			return nil, errdefs.Invalid("unknown setting %q (known: %s)", k, strings.Join(prefixed(name, known), ", "))
		}
		out[key] = v
	}
	return out, nil
}

func prefixed(name string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = name + "." + k
	}
	return out
}
