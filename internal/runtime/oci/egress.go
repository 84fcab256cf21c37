package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Where a sandbox with egress finds the proxy's socket. The directory, not
// the socket, is bind-mounted: a socket made again after a daemon restart
// is a new inode, which a mount of the old one would not show.
const (
	dirEgress      = "egress"     // in the sandbox dir, mode 0700
	fileEgressSock = "proxy.sock" // in dirEgress
	egressMount    = "/.agent2env/egress"
)

// egressSock is the host path of sandbox id's proxy socket.
func (r *Runtime) egressSock(id string) string {
	return filepath.Join(r.dir(id), dirEgress, fileEgressSock)
}

// validateEgress checks that the runtime can give spec the egress it asks
// for.
func (r *Runtime) validateEgress(spec *sandbox.Spec) error {
	if spec.Network.Egress == nil {
		return nil
	}
	if r.cfg.Egress == nil {
		return fmt.Errorf("sandbox %s needs network egress, which this runtime is not configured for", spec.ID)
	}
	if p := r.egressSock(spec.ID); len(p) > maxSocketPath {
		return fmt.Errorf("sandbox id %q makes the egress socket path %s longer than %d bytes", spec.ID, p, maxSocketPath)
	}
	return nil
}

// serveEgress makes sandbox id's proxy socket afresh and serves the proxy
// on it under the sandbox's policy until stopEgress.
func (r *Runtime) serveEgress(id string, e *sandbox.Egress) error {
	policy := netproxy.Policy{AllowAll: e.AllowInternet, Domains: e.AllowedDomains}
	return r.serveSocket(id, sockEgress, r.egressSock(id), func(ctx context.Context, l net.Listener) error {
		return r.cfg.Egress.Serve(ctx, l, policy)
	})
}

// stopEgress stops serving sandbox id's proxy, if it is served, and ends
// the connections through it.
func (r *Runtime) stopEgress(id string) { r.stopSocket(id, sockEgress) }

// The sockets a runtime serves to a sandbox, by kind.
const (
	sockEgress   = "egress"
	sockServices = "services"
)

// serveSocket makes sandbox id's socket of kind afresh at sock and serves
// it with serve until stopSocket.
func (r *Runtime) serveSocket(id, kind, sock string, serve func(context.Context, net.Listener) error) error {
	r.stopSocket(id, kind)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return fmt.Errorf("serve %s socket: %w", kind, err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("serve %s socket: %w", kind, err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("serve %s socket: %w", kind, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serve(ctx, l); err != nil {
			r.log.Warn(kind+" socket stopped", "sandbox", id, "err", err)
		}
	}()
	r.mu.Lock()
	r.egress[id+"/"+kind] = func() {
		cancel()
		<-done
	}
	r.mu.Unlock()
	return nil
}

// stopSocket stops serving sandbox id's socket of kind, if it is served,
// and ends the connections through it.
func (r *Runtime) stopSocket(id, kind string) {
	r.mu.Lock()
	stop := r.egress[id+"/"+kind]
	delete(r.egress, id+"/"+kind)
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Where every sandbox finds the daemon's services (when the runtime has
// Config.Services), mounted like the egress directory.
const (
	dirServices      = "svc"
	fileServicesSock = "daemon.sock"
	servicesMount    = "/.agent2env/services"
)

func (r *Runtime) servicesSock(id string) string {
	return filepath.Join(r.dir(id), dirServices, fileServicesSock)
}

// serveServices serves the daemon's services to sandbox id until
// stopServices.
func (r *Runtime) serveServices(id string) error {
	return r.serveSocket(id, sockServices, r.servicesSock(id), func(ctx context.Context, l net.Listener) error {
		return r.cfg.Services.ServeSandbox(ctx, l, id)
	})
}

func (r *Runtime) stopServices(id string) { r.stopSocket(id, sockServices) }

// stopSockets stops every socket served to sandbox id.
func (r *Runtime) stopSockets(id string) {
	r.stopEgress(id)
	r.stopServices(id)
}

// Close stops serving the egress proxies and services of every sandbox, as the daemon's
// exit would; sandboxes keep running, and a new Runtime's Recover serves
// them again. The Runtime stays usable.
func (r *Runtime) Close() {
	r.mu.Lock()
	keys := make([]string, 0, len(r.egress))
	for k := range r.egress {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		id, kind, _ := strings.Cut(k, "/")
		r.stopSocket(id, kind)
	}
}
