// Package netproxy is the daemon's egress proxy: the only way out of a
// sandbox, for sandboxes whose template allows network access at all.
//
// A sandbox has no network interface but loopback. For a sandbox with
// egress, the runtime makes a unix socket on the host and serves this proxy
// on it with the sandbox's Policy (one listener per sandbox, so the proxy
// knows whose connection it has without believing anything the sandbox
// says); the in-sandbox agent forwards the sandbox's 127.0.0.1:3128 to that
// socket, and commands find it in HTTP_PROXY and HTTPS_PROXY.
//
// The proxy speaks HTTP/1.1 as a forward proxy: CONNECT host:port opens a
// tunnel (HTTPS, or any TCP protocol), and requests with an absolute http
// URI are forwarded, hop-by-hop headers removed and upgrades (WebSocket)
// spliced. Every host is checked against the Policy before anything is
// dialed: a refused one gets 403 with a body that says why. Names are
// resolved by the proxy, not the sandbox, through Config.DialContext; the
// default (GuardedDialer) also refuses addresses of the daemon's own host
// and networks, so that allowing the internet does not allow the daemon's
// API on its loopback or a cloud metadata service.
//
// A Proxy is safe for concurrent use and serves any number of listeners.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Proxy. The zero value is usable.
type Config struct {
	// DialContext connects to "host:port" for a request the policy
	// allows; host is a name or an IP literal as the client gave it.
	// Default: GuardedDialer(DialTimeout, AllowPrivateNetworks).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// AllowPrivateNetworks lets the default dialer reach private addresses
	// (RFC 1918, unique local, shared address space). Loopback and
	// link-local addresses stay refused.
	AllowPrivateNetworks bool
	// DialTimeout bounds connecting to a host. Default 30s.
	DialTimeout time.Duration
	// IdleTimeout closes a tunnel, or a client connection between
	// requests, after this long without traffic. Default 10 minutes.
	IdleTimeout time.Duration
	// MaxConns bounds the client connections served at once on one
	// listener; more wait in the listen backlog. Default 256.
	MaxConns int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Proxy is an egress proxy. Make one with New.
type Proxy struct {
	cfg Config
	log *slog.Logger
}

// New returns a Proxy.
func New(cfg Config) *Proxy {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DialContext == nil {
		cfg.DialContext = GuardedDialer(cfg.DialTimeout, cfg.AllowPrivateNetworks)
	}
	return &Proxy{cfg: cfg, log: cfg.Logger}
}

// Timeouts of the client side that need no configuration.
const (
	readHeaderTimeout = 30 * time.Second
	maxHeaderBytes    = 64 << 10
)

// Serve answers proxy requests on l under policy until ctx is done or l is
// closed, then closes l and every connection it served, and returns once
// they are all gone. It returns nil in both cases, and the listener's
// error otherwise.
func (p *Proxy) Serve(ctx context.Context, l net.Listener, policy Policy) error {
	ll := &limitListener{Listener: l, sem: make(chan struct{}, p.cfg.MaxConns),
		done: make(chan struct{}), conns: map[*limitConn]struct{}{}}
	s := &session{p: p, match: compile(policy), ll: ll, done: make(chan struct{})}
	s.tr = &http.Transport{
		Proxy:                 nil, // never the daemon's own proxy settings
		DialContext:           s.dial,
		MaxIdleConns:          32,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass Accept-Encoding and bodies through
	}
	s.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The URL is absolute and checked; the Host header follows it.
			pr.Out.Host = ""
		},
		Transport:    s.tr,
		ErrorHandler: s.proxyError,
		ErrorLog:     log.New(io.Discard, "", 0),
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	stop := context.AfterFunc(ctx, func() {
		close(ll.done)
		_ = l.Close()
	})
	defer stop()
	err := srv.Serve(ll)
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	// Serve ended: end what it served, hijacked and upgraded connections
	// included (the server forgets those).
	_ = l.Close()
	_ = srv.Close()
	s.close()
	s.tr.CloseIdleConnections()
	return err
}

// session serves one listener: one sandbox.
type session struct {
	p     *Proxy
	match *matcher
	tr    *http.Transport
	rp    *httputil.ReverseProxy

	ll   *limitListener
	done chan struct{} // closed by close

	mu     sync.Mutex
	closed bool
	active sync.WaitGroup // handlers running
}

// enter registers a handler; it fails once the session is closing.
func (s *session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

// close ends every client connection and waits for every handler to
// return.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	s.ll.closeAll()
	s.active.Wait()
}

func (s *session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		writeText(w, http.StatusServiceUnavailable, "netproxy: shutting down")
		return
	}
	defer s.active.Done()
	if r.Method == http.MethodConnect {
		s.connect(w, r)
		return
	}
	s.forward(w, r)
}

// check returns nil if the policy allows host, or a denial.
func (s *session) check(host string) error {
	if s.match.allows(host) {
		return nil
	}
	return &deniedError{Msg: fmt.Sprintf("access to %s is denied by the sandbox's network policy (not in network.allowedDomains)", host)}
}

// dial checks addr's host against the policy and connects to it. Every
// connection the session makes goes through here.
func (s *session) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := s.check(host); err != nil {
		return nil, err
	}
	if _, isAddr := parseAddr(host); !isAddr {
		host = normalizeName(host) // the name the policy allowed
	}
	ctx, cancel := context.WithTimeout(ctx, s.p.cfg.DialTimeout)
	defer cancel()
	return s.p.cfg.DialContext(ctx, network, net.JoinHostPort(host, port))
}

// connect opens a tunnel to r.Host.
func (s *session) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || !validPort(port) {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("netproxy: CONNECT needs host:port, got %q", r.Host))
		return
	}
	// A client that half-closes right after its request (nc with a
	// here-document) looks gone to the server, which cancels the request's
	// context; the tunnel is still wanted. DialTimeout bounds the dial,
	// and so does the session's end.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	up, err := s.dial(ctx, "tcp", net.JoinHostPort(host, port))
	cancel()
	if err != nil {
		s.dialError(w, r, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		writeText(w, http.StatusInternalServerError, "netproxy: "+err.Error())
		return
	}
	// The server's header deadline still holds on a hijacked connection.
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = conn.Close()
		_ = up.Close()
		return
	}
	// A client may send its first bytes (a TLS hello) without waiting.
	var client net.Conn = conn
	if n := brw.Reader.Buffered(); n > 0 {
		client = &prefixConn{Conn: conn, r: io.MultiReader(io.LimitReader(brw.Reader, int64(n)), conn)}
	}
	splice(client, up, s.p.cfg.IdleTimeout)
}

// forward sends an absolute-URI request on.
func (s *session) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Host == "" || r.URL.Scheme == "" {
		writeText(w, http.StatusBadRequest, "netproxy: this is a proxy: send requests with an absolute URI, or CONNECT")
		return
	}
	if r.URL.Scheme != "http" {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("netproxy: scheme %q is not proxied; use CONNECT for https", r.URL.Scheme))
		return
	}
	if p := r.URL.Port(); p != "" && !validPort(p) {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("netproxy: invalid port %q", p))
		return
	}
	if err := s.check(r.URL.Hostname()); err != nil {
		writeText(w, http.StatusForbidden, "netproxy: "+err.Error())
		return
	}
	s.rp.ServeHTTP(w, r)
}

// proxyError answers a forwarded request that failed before a response.
func (s *session) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client is gone
	}
	s.dialError(w, r, err)
}

// dialError answers a failure to reach the host: 403 when refused, 504 on
// a timeout, 502 otherwise.
func (s *session) dialError(w http.ResponseWriter, r *http.Request, err error) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrDenied):
		writeText(w, http.StatusForbidden, "netproxy: "+deniedMessage(err))
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		writeText(w, http.StatusGatewayTimeout, fmt.Sprintf("netproxy: %s: timed out", target(r)))
	default:
		writeText(w, http.StatusBadGateway, fmt.Sprintf("netproxy: %s: %v", target(r), err))
	}
}

// target is the host:port a request is for.
func target(r *http.Request) string {
	if r.URL.Host != "" {
		return r.URL.Host
	}
	return r.Host
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}

// limitListener bounds the connections open at once and keeps them, so
// that closeAll can end them. done ends a wait for a free slot.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}

	mu     sync.Mutex
	closed bool
	conns  map[*limitConn]struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = lc.Conn.Close()
		<-l.sem
		return nil, net.ErrClosed
	}
	l.conns[lc] = struct{}{}
	return lc, nil
}

// closeAll closes every connection accepted and not yet closed, and makes
// Accept close any it still accepts.
func (l *limitListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := make([]*limitConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// limitConn frees its slot when closed.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.sem
	})
	return err
}

func (c *limitConn) CloseWrite() error { return closeWrite(c.Conn) }

// prefixConn reads what a bufio.Reader held before the connection.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *prefixConn) CloseWrite() error          { return closeWrite(c.Conn) }

// closeWrite half-closes c if it can, and reports whether it could.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// splice copies between a and b in both directions until both are done,
// passing the end of one direction on as a half close; an error in either,
// or idle without traffic either way, ends both. It closes a and b.
func splice(a, b net.Conn, idle time.Duration) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	closeBoth := func() {
		_ = a.Close()
		_ = b.Close()
	}
	var watchdog *time.Timer
	watchdog = time.AfterFunc(idle, func() {
		if since := time.Since(time.Unix(0, last.Load())); since < idle {
			watchdog.Reset(idle - since)
			return
		}
		closeBoth()
	})
	defer watchdog.Stop()
	done := make(chan struct{}, 2)
	pump := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					closeBoth()
					return
				}
			}
			if errors.Is(err, io.EOF) {
				if closeWrite(dst) != nil {
					closeBoth()
				}
				return
			}
			if err != nil {
				closeBoth()
				return
			}
		}
	}
	go pump(a, b)
	go pump(b, a)
	<-done
	<-done
	closeBoth()
}
