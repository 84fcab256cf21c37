package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
)

// EnvJupyterProbe, when set in a sandbox's environment, is a loopback
// address (JupyterProbeAddr) on which the agent accepts TCP connections
// and closes them at once. OpenSandbox's code-interpreter SDK checks that
// a sandbox is ready by opening a connection to its Jupyter server
// (`exec 3<>/dev/tcp/127.0.0.1/44771` in bash) and sends nothing to it:
// the agent runs the kernels itself, so it only has to accept. The
// OpenSandbox surface sets it on the sandboxes it makes. Unlike the
// AGENT2ENV_AGENT_ variables it comes from the sandbox's own environment,
// so commands see it; it opens nothing but a port on the loopback.
const EnvJupyterProbe = "AGENT2ENV_JUPYTER_PROBE"

// JupyterProbeAddr is the address OpenSandbox's SDK probes
// (${JUPYTER_PORT:-44771}).
const JupyterProbeAddr = "127.0.0.1:44771"

// startProbe listens on addr, which must be a loopback address, and
// accepts and closes connections until ctx is done. It listens before it
// returns, so that the probe succeeds as soon as commands can run, and
// returns the address it listens on.
func startProbe(ctx context.Context, addr string, log *slog.Logger) (net.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvJupyterProbe, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s: %q is not a loopback address", EnvJupyterProbe, addr)
	}
	var lc net.ListenConfig
	// Plain TCP, not Go's default multipath TCP, which CRIU cannot dump: a
	// sandbox made through OpenSandbox's API must stay checkpointable.
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvJupyterProbe, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	go func() {
		defer stop()
		for {
			c, err := l.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
					log.Warn("jupyter probe listener stopped", "err", err)
				}
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr(), nil
}

// startProbeFromEnv starts the probe listener when the environment asks
// for one; a failure is logged, not fatal: the sandbox works without it.
func startProbeFromEnv(ctx context.Context, log *slog.Logger) {
	if addr := os.Getenv(EnvJupyterProbe); addr != "" {
		if _, err := startProbe(ctx, addr, log); err != nil {
			log.Warn("jupyter probe", "err", err)
		}
	}
}
