package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

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
	r.stopEgress(id)
	sock := r.egressSock(id)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return fmt.Errorf("serve egress proxy: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("serve egress proxy: %w", err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("serve egress proxy: %w", err)
	}
	policy := netproxy.Policy{AllowAll: e.AllowInternet, Domains: e.AllowedDomains}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.cfg.Egress.Serve(ctx, l, policy); err != nil {
			r.log.Warn("egress proxy stopped", "sandbox", id, "err", err)
		}
	}()
	r.mu.Lock()
	r.egress[id] = func() {
		cancel()
		<-done
	}
	r.mu.Unlock()
	return nil
}

// stopEgress stops serving sandbox id's proxy, if it is served, and ends
// the connections through it.
func (r *Runtime) stopEgress(id string) {
	r.mu.Lock()
	stop := r.egress[id]
	delete(r.egress, id)
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Close stops serving the egress proxies of every sandbox, as the daemon's
// exit would; sandboxes keep running, and a new Runtime's Recover serves
// them again. The Runtime stays usable.
func (r *Runtime) Close() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.egress))
	for id := range r.egress {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.stopEgress(id)
	}
}
