package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// The daemon's services and egress proxy reach a sandbox one of two ways.
// On one host (oci) the agent forwards each local connection to a unix
// socket the runtime mounts (EnvServices, EnvEgress). Where the sandbox
// runs elsewhere (a Pod) the daemon dials instead, so that the sandbox
// needs no way out: the agent listens on the sandbox's address, and hands
// each local connection to one of the connections the daemon keeps
// waiting in GET /v1/accept (Client.Listen). The daemon knows the sandbox
// by the channel it opened to its agent.

// EnvServicesAccept, when set, is the address (ServicesAddr) on which the
// agent takes the sandbox's connections to the daemon's services, for the
// daemon to accept (AcceptServices). Commands get ServicesEnv.
const EnvServicesAccept = "AGENT2ENV_AGENT_SERVICES_ACCEPT"

// EnvEgressAccept is EnvServicesAccept for the egress proxy (EgressAddr,
// AcceptEgress); commands get EgressEnv.
const EnvEgressAccept = "AGENT2ENV_AGENT_EGRESS_ACCEPT"

// The names of what the daemon accepts through GET /v1/accept.
const (
	AcceptServices = "services"
	AcceptEgress   = "egress"
)

// acceptProtocol is the Upgrade token of GET /v1/accept: after the agent's
// 101 answer the connection carries the bytes of a connection a sandbox's
// process made.
const acceptProtocol = "agent2env-accept"

// acceptor hands the local connections of one listener to the daemon's
// waiting accept requests.
type acceptor struct {
	l net.Listener
	// claims carries, from a local connection to a waiting request, where
	// the request sends its connection once switched (nil if it failed).
	claims chan chan net.Conn
}

func newAcceptor(l net.Listener) *acceptor {
	return &acceptor{l: l, claims: make(chan chan net.Conn)}
}

// serve relays the local connections until ctx is done, when it closes the
// listener and every relayed connection. A local connection waits up to
// dialTimeout for a request of the daemon, else it is closed.
func (a *acceptor) serve(ctx context.Context) error {
	return Forward(ctx, a.l, a.next)
}

// next returns the connection of the next request of the daemon.
func (a *acceptor) next(ctx context.Context) (net.Conn, error) {
	reply := make(chan net.Conn, 1)
	for {
		select {
		case a.claims <- reply:
		case <-ctx.Done():
			return nil, fmt.Errorf("no connection from the daemon: %w", ctx.Err())
		}
		// A request that took the claim answers at once.
		if c := <-reply; c != nil {
			return c, nil
		}
	}
}

// handleAccept waits for the sandbox's next local connection to the
// address named by ?name, then switches the request's connection to carry
// it. A request whose client goes away before gives up its place.
func (s *Server) handleAccept(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	a := s.accepts[name]
	if a == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Errorf("this agent accepts nothing named %q", name))
		return
	}
	if !upgrading(w, r, acceptProtocol) {
		return
	}
	select {
	case reply := <-a.claims:
		if r.Context().Err() != nil { // its client went as the claim came
			reply <- nil
			return
		}
		conn, err := switchProtocols(w, acceptProtocol)
		if err != nil {
			reply <- nil // the local connection waits for another
			return
		}
		reply <- conn
	case <-r.Context().Done():
	}
}

// Accept waits for the sandbox's next connection to the agent's accept
// address called name, and returns it. ctx bounds the wait. An agent that
// serves no such address answers ErrNotFound.
func (c *Client) Accept(ctx context.Context, name string) (net.Conn, error) {
	return c.open(ctx, "/v1/accept?name="+url.QueryEscape(name), acceptProtocol, "accept "+name)
}

// Listener is the daemon's end of a sandbox's accept address: it keeps a
// few Accept requests waiting in the agent, so that a local connection is
// taken at once, and makes a new one for each that returns. Failures (the
// agent not up yet, gone, a Pod being replaced) are retried with back-off
// until Close. Make it with Client.Listen.
type Listener struct {
	c      *Client
	name   string
	log    *slog.Logger
	conns  chan net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Retry back-off of a Listener's requests.
const (
	acceptBackoffMin = 50 * time.Millisecond
	acceptBackoffMax = 5 * time.Second
)

// Listen returns a Listener of the agent's accept address called name,
// with idle requests waiting at a time (at least one).
func (c *Client) Listen(name string, idle int, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{c: c, name: name, log: log, conns: make(chan net.Conn), ctx: ctx, cancel: cancel}
	for range max(idle, 1) {
		l.wg.Go(l.run)
	}
	return l
}

// run keeps one request waiting until the Listener closes.
func (l *Listener) run() {
	var (
		backoff time.Duration
		warned  bool
	)
	for {
		conn, err := l.c.Accept(l.ctx, l.name)
		if l.ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			if backoff == acceptBackoffMax && !warned {
				l.log.Warn("accept from sandbox: retrying", "name", l.name, "err", err)
				warned = true
			}
			select {
			case <-time.After(backoff):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		backoff, warned = 0, false
		select {
		case l.conns <- conn:
		case <-l.ctx.Done():
			conn.Close()
			return
		}
	}
}

// Accept returns the sandbox's next connection, or net.ErrClosed once the
// Listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close ends the waiting requests and waits for them. Connections Accept
// returned stay open. It is safe to call more than once.
func (l *Listener) Close() error {
	l.cancel()
	l.wg.Wait()
	return nil
}

// Addr names the accept address.
func (l *Listener) Addr() net.Addr { return acceptAddr(l.name) }

type acceptAddr string

func (acceptAddr) Network() string  { return "agent-accept" }
func (a acceptAddr) String() string { return string(a) }
