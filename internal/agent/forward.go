package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// EgressAddr is where the agent of a sandbox with egress listens for the
// sandbox's proxy clients, on the sandbox's loopback.
const EgressAddr = "127.0.0.1:3128"

// EnvEgress names the unix socket of the daemon's egress proxy as the
// agent sees it. When set, the agent forwards EgressAddr to it and points
// commands at EgressAddr (EgressEnv).
const EnvEgress = "AGENT2ENV_AGENT_EGRESS"

// EgressEnv is the environment that sends commands' HTTP clients through
// the forwarder: both spellings, since tools disagree on which they read.
// A template's own values for these win.
var EgressEnv = []string{
	"HTTP_PROXY=http://" + EgressAddr,
	"HTTPS_PROXY=http://" + EgressAddr,
	"http_proxy=http://" + EgressAddr,
	"https_proxy=http://" + EgressAddr,
	"NO_PROXY=localhost,127.0.0.1",
	"no_proxy=localhost,127.0.0.1",
}

// ServicesAddr is where every sandbox finds the daemon's services (the LLM
// proxy under /llm, MCP at /mcp), on its own loopback.
const ServicesAddr = "127.0.0.1:4000"

// EnvServices names the unix socket of the daemon's services as the agent
// sees it. When set, the agent forwards ServicesAddr to it and gives
// commands ServicesEnv.
const EnvServices = "AGENT2ENV_AGENT_SERVICES"

// ServicesEnv points the agent CLIs and model SDKs in a sandbox at the
// daemon's LLM proxy, with a placeholder key: the proxy knows the sandbox
// by its channel and holds the real keys. A template's (or the image's)
// own values win.
var ServicesEnv = []string{
	"AGENT2ENV_LLM_URL=http://" + ServicesAddr + "/llm",
	"AGENT2ENV_MCP_URL=http://" + ServicesAddr + "/mcp",
	"OPENAI_BASE_URL=http://" + ServicesAddr + "/llm/v1",
	"ANTHROPIC_BASE_URL=http://" + ServicesAddr + "/llm",
	"GOOGLE_GEMINI_BASE_URL=http://" + ServicesAddr + "/llm",
	"OPENAI_API_KEY=agent2env",
	"ANTHROPIC_API_KEY=agent2env",
	"GEMINI_API_KEY=agent2env",
}

// maxForwards bounds the connections the forwarder relays at once; more
// wait in the listen backlog. The proxy has its own bound per sandbox.
const maxForwards = 512

// portOf is the port of a host:port address of this package (EgressAddr,
// ServicesAddr, an accept address); 0 when it has none.
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// startForward listens on addr and relays each connection to the unix
// socket sock until ctx is done. It listens before returning, so that no
// command can take the address first.
func startForward(ctx context.Context, addr, sock, name string, log *slog.Logger) error {
	var lc net.ListenConfig
	// Plain TCP, not Go's default multipath TCP, which CRIU cannot dump: a
	// sandbox must stay checkpointable.
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(ctx, "tcp4", addr)
	if err != nil {
		return err
	}
	go func() {
		if err := Forward(ctx, l, unixDialer(sock)); err != nil {
			log.Warn(name+" forwarder stopped", "err", err)
		}
	}()
	return nil
}

// unixDialer returns a dial of the unix socket sock that waits, until
// its context is done, while the socket refuses connections or is not
// there: the daemon behind it restarting (an upgrade, a crash). A
// request a command makes meanwhile, or a model client's retry of one
// the restart cut, goes through once the daemon is back rather than
// failing at once.
func unixDialer(sock string) func(context.Context) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context) (net.Conn, error) {
		wait := 10 * time.Millisecond
		for {
			c, err := d.DialContext(ctx, "unix", sock)
			if err == nil || !daemonAway(err) {
				return c, err
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(wait):
			}
			wait = min(2*wait, 250*time.Millisecond)
		}
	}
}

// daemonAway reports whether err, a dial's of a unix socket, says that
// nothing serves it for now: refused, not there, or its backlog full.
func daemonAway(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EAGAIN)
}

// Forward accepts connections on l and relays each to a connection from
// dial until ctx is done, when it closes l and every relayed connection.
// It only carries bytes: a client whose connection dial cannot make
// within dialTimeout is disconnected. In the agent, the proxy behind dial enforces the policy;
// the e2e tests' browser reaches the daemon through it.
func Forward(ctx context.Context, l net.Listener, dial func(context.Context) (net.Conn, error)) error {
	var (
		mu     sync.Mutex
		closed bool // set by closeAll: no relay may start after it
		conns  = map[net.Conn]struct{}{}
		wg     sync.WaitGroup
		sem    = make(chan struct{}, maxForwards)
	)
	closeAll := func() {
		_ = l.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	}
	stop := context.AfterFunc(ctx, closeAll)
	defer func() {
		stop()
		closeAll()
		wg.Wait()
	}()
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := l.Accept()
		if err != nil {
			<-sem
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, dialTimeout)
			up, err := dial(dctx)
			cancel()
			if err != nil {
				_ = c.Close()
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				_ = c.Close()
				_ = up.Close()
				return
			}
			conns[c], conns[up] = struct{}{}, struct{}{}
			mu.Unlock()
			splice(c, up)
			mu.Lock()
			delete(conns, c)
			delete(conns, up)
			mu.Unlock()
		}()
	}
}

// splice copies between a and b in both directions until both are done,
// passing the end of one direction on as a half close; an error in either
// ends both. It closes a and b.
func splice(a, b net.Conn) {
	closeBoth := func() {
		_ = a.Close()
		_ = b.Close()
	}
	done := make(chan struct{}, 2)
	pump := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		if _, err := io.Copy(dst, src); err != nil {
			closeBoth()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
			closeBoth()
		}
	}
	go pump(a, b)
	go pump(b, a)
	<-done
	<-done
	closeBoth()
}
