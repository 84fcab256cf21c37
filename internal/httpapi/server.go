package httpapi

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
)

// ServerConfig bounds the API server's connections, so that slow or idle
// clients cannot hold the daemon's goroutines and file descriptors. Zero
// fields take the defaults.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default
	// 120s.
	IdleTimeout time.Duration
	// StallTimeout ends a request whose body has sent no byte, or whose
	// response the client has taken no byte of, for this long; a transfer
	// that moves goes on however long it takes, and responses that wait
	// for output (event streams, long execs) are not bounded. Default 60s.
	StallTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; more wait in the
	// listen backlog. Default 4096.
	MaxConns int
	// MaxConnsPerClient bounds the connections from one IP address; more
	// are answered 429 and closed. Default 1024. (Every local client
	// shares 127.0.0.1.)
	MaxConnsPerClient int
}

func (c *ServerConfig) setDefaults() {
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 60 * time.Second
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 4096
	}
	if c.MaxConnsPerClient <= 0 {
		c.MaxConnsPerClient = 1024
	}
}

// NewServer returns the server of handler h (the API's, or a sandbox's
// channel's) with c's bounds. It sets no WriteTimeout: a buffered exec may
// answer hours after its request, and streams last as long as their
// command; StallTimeout bounds a client that stops reading. Serve it on
// LimitListener.
func NewServer(c ServerConfig, h http.Handler, log *slog.Logger) *http.Server {
	c.setDefaults()
	srv := &http.Server{
		Handler:           StallTimeout(c.StallTimeout)(h),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// HTTP/2 without TLS as well (prior knowledge), so that one connection
	// carries concurrent calls (MCP clients).
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

// LimitListener bounds the connections l accepts as c says: at most
// MaxConns at once (Accept waits for one to close) and MaxConnsPerClient
// from one IP address (more are answered 429 LIMIT_EXCEEDED and closed).
func LimitListener(l net.Listener, c ServerConfig, log *slog.Logger) net.Listener {
	c.setDefaults()
	return &connLimiter{Listener: l, log: log, perClient: c.MaxConnsPerClient,
		slots: make(chan struct{}, c.MaxConns), done: make(chan struct{}), clients: map[netip.Addr]int{}}
}

// ChannelLimit bounds the connections of every sandbox's channel to the
// daemon's in-sandbox services: MaxConns of them at once, all sandboxes
// together, and MaxConnsPerClient from one sandbox (a sandbox is one
// client, which its channel, a socket of its own, tells). More wait in the
// channel's backlog, but for one each channel has accepted and holds until
// a shared slot is free: code in a sandbox cannot hold more of the
// daemon's file descriptors than these, whatever it opens.
type ChannelLimit struct {
	log        *slog.Logger
	slots      chan struct{}
	perChannel int
}

// NewChannelLimit returns the limit of c's MaxConns and MaxConnsPerClient.
func NewChannelLimit(c ServerConfig, log *slog.Logger) *ChannelLimit {
	c.setDefaults()
	return &ChannelLimit{log: log, slots: make(chan struct{}, c.MaxConns), perChannel: c.MaxConnsPerClient}
}

// Listener returns l, one sandbox's channel, bounded by cl.
func (cl *ChannelLimit) Listener(l net.Listener) net.Listener {
	return &connLimiter{Listener: l, log: cl.log, slots: make(chan struct{}, cl.perChannel), shared: cl.slots,
		done: make(chan struct{}), clients: map[netip.Addr]int{}}
}

// connLimiter is a listener that holds at most cap(slots) connections,
// and, with shared, one of its slots each: Accept waits for both. It
// refuses connections from one IP address past perClient (0: no bound).
type connLimiter struct {
	net.Listener
	log       *slog.Logger
	perClient int
	slots     chan struct{}
	shared    chan struct{} // nil: none
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	mu      sync.Mutex
	clients map[netip.Addr]int
}

// acquire takes a slot, waiting; false once l is closed.
func (l *connLimiter) acquire() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

// acquireShared takes a shared slot, if l has them, for a connection
// accepted: taken before Accept, a listener with nothing to accept would
// hold one, and many idle channels all of them. Waiting, l holds this one
// connection it accepted, no more. False once l is closed.
func (l *connLimiter) acquireShared() bool {
	if l.shared == nil {
		return true
	}
	select {
	case l.shared <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

// release gives back what acquire and acquireShared took.
func (l *connLimiter) release() {
	if l.shared != nil {
		<-l.shared
	}
	<-l.slots
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		if !l.acquire() {
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		if !l.acquireShared() {
			c.Close()
			<-l.slots
			return nil, net.ErrClosed
		}
		ip, ok := remoteIP(c)
		if !ok || l.perClient <= 0 {
			return &limitedConn{Conn: c, release: l.release}, nil
		}
		l.mu.Lock()
		n := l.clients[ip]
		if n >= l.perClient {
			l.mu.Unlock()
			// The refusal keeps its slot until it is done, so that a flood
			// of them is bounded like any other connections.
			go func() {
				l.refuse(c, ip)
				l.release()
			}()
			continue
		}
		l.clients[ip] = n + 1
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.clients[ip]--; l.clients[ip] <= 0 {
				delete(l.clients, ip)
			}
			l.mu.Unlock()
			l.release()
		}}, nil
	}
}

// refuse answers a connection over the per-client limit and closes it.
func (l *connLimiter) refuse(c net.Conn, ip netip.Addr) {
	defer c.Close()
	l.log.Debug("refused a connection: too many from one client", "client", ip.String(), "limit", l.perClient)
	body := fmt.Sprintf(`{"error":"too many connections from %s (at most %d)","code":%q}`, ip, l.perClient, api.CodeLimitExceeded)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func remoteIP(c net.Conn) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, false // a unix socket
	}
	return ap.Addr().Unmap(), true
}

// limitedConn gives its slots back when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
