package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrDenied is the class of every refusal by policy or by the address
// guard; the proxy answers it with 403.
var ErrDenied = errors.New("denied")

// deniedError says what was refused and why.
type deniedError struct{ msg string }

func (e *deniedError) Error() string        { return e.msg }
func (e *deniedError) Is(target error) bool { return target == ErrDenied }

// Ranges the default dialer refuses unless private networks are allowed:
// RFC 1918 and unique local addresses (netip's IsPrivate), and shared
// address space (RFC 6598).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Ranges the default dialer always refuses besides loopback, link-local,
// multicast and unspecified addresses: "this network", the reserved and
// broadcast block, and the IPv6 address of EC2's metadata service, which is
// unique local and so would pass with private networks allowed.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// addrDenied returns why a connection to a may not be made, or "".
func addrDenied(a netip.Addr, allowPrivate bool) string {
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

// GuardedDialer returns the default DialContext: a dialer that resolves
// names and then refuses, at connect time and so after any DNS answer
// (rebinding included), addresses that belong to the daemon's host or its
// networks rather than the internet: loopback, link-local (cloud metadata
// services), multicast, unspecified and reserved addresses, and private
// ones unless allowPrivate. A refusal matches ErrDenied.
func GuardedDialer(timeout time.Duration, allowPrivate bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("parse dial address %q: %w", address, err)
			}
			if why := addrDenied(ap.Addr(), allowPrivate); why != "" {
				return &deniedError{msg: fmt.Sprintf("%s is %s, which sandboxes may not reach", ap.Addr(), why)}
			}
			return nil
		},
	}
	return d.DialContext
}
