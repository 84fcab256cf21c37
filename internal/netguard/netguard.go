// Package netguard decides which network addresses the daemon may connect
// to on behalf of input it does not trust — a template's file source URL,
// a sandbox's egress — and makes those connections.
//
// A Guard refuses the addresses of the daemon's host and its networks
// rather than the internet: loopback, link-local (cloud metadata
// services), multicast, unspecified and reserved addresses, every address
// of the host's own interfaces, and private ones (RFC 1918, unique local,
// shared address space) unless Config.AllowPrivate. The check runs in the
// dialer's Control function, on the address actually being connected to,
// after name resolution: a name that resolves (or rebinds) to an internal
// address is refused like the address itself, and an HTTP client dialing
// through the Guard is held to it on every redirect. An operator's
// allow-list (names, addresses, CIDR prefixes) exempts internal mirrors.
//
// The host's interface addresses are read once and re-read when they are
// more than a couple of seconds old, so that a connection costs a map
// lookup, and an address the host gains is refused within that time.
//
// Fetcher downloads a URL through a Guard, bounded in size, time and
// redirects. Guards and Fetchers are safe for concurrent use.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrDenied is the class of every refusal by a Guard.
var ErrDenied = errors.New("denied")

// DeniedError says what was refused and why. It matches ErrDenied.
type DeniedError struct{ Msg string }

func (e *DeniedError) Error() string        { return e.Msg }
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Config configures a Guard. The zero value refuses every internal
// address and allows nothing extra.
type Config struct {
	// AllowPrivate lets private addresses (RFC 1918, unique local, shared
	// address space) be reached. Loopback, link-local and the host's own
	// addresses stay refused.
	AllowPrivate bool
	// Allow exempts internal mirrors from every check: host names (exact,
	// case-insensitive; a connection to that name may go wherever it
	// resolves), IP addresses and CIDR prefixes ("10.1.0.0/16"). An entry
	// that covers one of the host's addresses makes whatever listens there
	// reachable, the daemon's API included.
	Allow []string
	// Subject names, in refusals, what the guard connects for: "which
	// <Subject> may not reach". Default "untrusted input".
	Subject string
}

// Guard checks and makes connections. Make one with New.
type Guard struct {
	allowPrivate bool
	names        map[string]bool
	prefixes     []netip.Prefix
	subject      string
	host         *hostAddrs
}

// New returns a Guard, or an error naming a malformed Allow entry.
func New(cfg Config) (*Guard, error) {
	g := &Guard{allowPrivate: cfg.AllowPrivate, names: map[string]bool{}, subject: cfg.Subject, host: hostAddresses}
	if g.subject == "" {
		g.subject = "untrusted input"
	}
	for _, e := range cfg.Allow {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			g.prefixes = append(g.prefixes, p.Masked())
			continue
		}
		if a, ok := parseAddr(e); ok {
			g.prefixes = append(g.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		name := normalizeName(e)
		if name == "" || strings.ContainsAny(name, "/:@[]* \t") {
			return nil, fmt.Errorf("allow-list entry %q is not a host name, an IP address or a CIDR prefix", e)
		}
		g.names[name] = true
	}
	return g, nil
}

// Must is New for configurations known to be valid (no Allow entries).
func Must(g *Guard, err error) *Guard {
	if err != nil {
		panic(err)
	}
	return g
}

// shared address space (RFC 6598), private like RFC 1918.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Ranges always refused besides loopback, link-local, multicast and
// unspecified addresses: "this network", the reserved and broadcast block,
// and the IPv6 address of EC2's metadata service, which is unique local and
// so would pass with private networks allowed.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// classify returns what kind of internal address a is, or "" for an
// address on the internet. It does not look at the host's interfaces.
func classify(a netip.Addr, allowPrivate bool) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.IsUnspecified():
		return "the unspecified address"
	case !allowPrivate && (a.IsPrivate() || cgnat.Contains(a)):
		return "a private address"
	}
	for _, p := range alwaysDenied {
		if p.Contains(a) {
			return "a reserved address"
		}
	}
	return ""
}

// CheckAddr returns nil if a may be connected to, or a *DeniedError.
func (g *Guard) CheckAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return nil
		}
	}
	why := classify(a, g.allowPrivate)
	if why == "" {
		own, err := g.host.has(a)
		switch {
		case err != nil:
			why = "possibly an address of this host (its addresses could not be read: " + err.Error() + ")"
		case own:
			why = "an address of this host"
		}
	}
	if why == "" {
		return nil
	}
	return &DeniedError{Msg: fmt.Sprintf("%s is %s, which %s may not reach", a, why, g.subject)}
}

// allowedName reports whether host, a name, is on the allow-list.
func (g *Guard) allowedName(host string) bool {
	return len(g.names) > 0 && g.names[normalizeName(host)]
}

// CheckURL checks a URL before anything is resolved: it must be http or
// https with a host, and the host must not be plainly internal — an
// internal IP literal or a loopback name (localhost, *.localhost) — unless
// allow-listed. Names are resolved, and checked, only when dialed. The
// error is a *DeniedError for an internal host.
func (g *Guard) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", raw)
	}
	host := u.Hostname()
	if a, ok := parseAddr(host); ok {
		return g.CheckAddr(a)
	}
	if g.allowedName(host) {
		return nil
	}
	if n := normalizeName(host); n == "localhost" || strings.HasSuffix(n, ".localhost") {
		return &DeniedError{Msg: fmt.Sprintf("%s is a loopback name, which %s may not reach", host, g.subject)}
	}
	return nil
}

// DialContext returns a dial function ("tcp", "host:port") that resolves
// names and connects only to addresses CheckAddr allows, each checked as
// it is dialed. A host name on the allow-list is dialed unchecked.
func (g *Guard) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	checked := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.control}
	if len(g.names) == 0 {
		return checked.DialContext
	}
	open := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && g.allowedName(host) {
			return open.DialContext(ctx, network, addr)
		}
		return checked.DialContext(ctx, network, addr)
	}
}

// control is the dialer's Control: address is the IP and port about to be
// connected to.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("parse dial address %q: %w", address, err)
	}
	return g.CheckAddr(ap.Addr())
}

// hostAddresses are the addresses of this host's interfaces, shared by
// every Guard.
var hostAddresses = &hostAddrs{read: interfaceAddrs, maxAge: 2 * time.Second}

// hostAddrs caches a set of addresses read by read, re-reading it on use
// once it is older than maxAge.
type hostAddrs struct {
	read   func() ([]netip.Addr, error)
	maxAge time.Duration

	mu  sync.Mutex // held while re-reading
	cur atomic.Pointer[addrSnapshot]
}

type addrSnapshot struct {
	addrs map[netip.Addr]bool // nil: never read successfully
	err   error               // of the last read
	at    time.Time
}

// has reports whether a is one of the addresses. When they have never
// been read successfully it returns the error.
func (h *hostAddrs) has(a netip.Addr) (bool, error) {
	s := h.cur.Load()
	if s == nil || time.Since(s.at) > h.maxAge {
		s = h.refresh()
	}
	if s.addrs == nil {
		return false, s.err
	}
	return s.addrs[a], nil
}

// refresh re-reads the addresses unless another caller just did. A failed
// read keeps the previous addresses.
func (h *hostAddrs) refresh() *addrSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.cur.Load(); s != nil && time.Since(s.at) <= h.maxAge {
		return s
	}
	next := &addrSnapshot{at: time.Now()}
	list, err := h.read()
	if err != nil {
		next.err = fmt.Errorf("read host addresses: %w", err)
		if prev := h.cur.Load(); prev != nil {
			next.addrs = prev.addrs
		}
	} else {
		next.addrs = make(map[netip.Addr]bool, len(list))
		for _, a := range list {
			next.addrs[a.Unmap().WithZone("")] = true
		}
	}
	h.cur.Store(next)
	return next
}

// interfaceAddrs returns the addresses of every interface of the host (of
// the daemon's network namespace).
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if na, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, na.Unmap())
		}
	}
	return out, nil
}

// parseAddr parses an IP literal, bracketed or not, without a zone.
func parseAddr(s string) (netip.Addr, bool) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func normalizeName(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}
