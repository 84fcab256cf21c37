package oci

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/agent2env/agent2env/internal/agent"
)

// dialGate admits the daemon's connections to one sandbox's agent, and
// holds new ones back while the sandbox is checkpointed: CRIU cannot dump
// a connection whose other end is outside the sandbox, and one the agent
// has not accepted yet is not among the agent's files, which
// waitConnsClosed counts. It counts the connections dialed (from before
// the dial) and not yet closed, so that a checkpoint knows when the
// daemon has none. The zero value admits every dial; it is safe for
// concurrent use.
type dialGate struct {
	mu sync.Mutex
	// held is closed when the gate opens again; nil while it is open.
	held chan struct{}
	open int
}

// dialer returns dial, admitted by the gate.
func (g *dialGate) dialer(dial agent.DialFunc) agent.DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		if err := g.admit(ctx); err != nil {
			return nil, err
		}
		c, err := dial(ctx)
		if err != nil {
			g.closed()
			return nil, err
		}
		return &gatedConn{Conn: c, g: g}, nil
	}
}

// admit waits until the gate is open, and counts a connection.
func (g *dialGate) admit(ctx context.Context) error {
	for {
		g.mu.Lock()
		held := g.held
		if held == nil {
			g.open++
			g.mu.Unlock()
			return nil
		}
		g.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *dialGate) closed() {
	g.mu.Lock()
	g.open--
	g.mu.Unlock()
}

// hold holds new dials back until release is called; the connections
// open go on.
func (g *dialGate) hold() (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := make(chan struct{})
	g.held = held
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.held == held {
			g.held = nil
		}
		close(held)
	}
}

// conns returns the number of connections dialed and not yet closed.
func (g *dialGate) conns() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// gatedConn is a connection counted by its gate until closed.
type gatedConn struct {
	net.Conn
	g    *dialGate
	once sync.Once
}

func (c *gatedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.g.closed)
	return err
}

// CloseWrite half-closes the connection (the agent client's port
// connections offer it).
func (c *gatedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
