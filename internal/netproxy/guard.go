package netproxy

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/agent2env/agent2env/internal/netguard"
)

// ErrDenied is the class of every refusal by policy or by the address
// guard; the proxy answers it with 403.
var ErrDenied = netguard.ErrDenied

// deniedError says what the policy refused and why.
type deniedError = netguard.DeniedError

// GuardedDialer returns the default DialContext: a dialer that resolves
// names and then refuses, at connect time and so after any DNS answer
// (rebinding included), addresses that belong to the daemon's host or its
// networks rather than the internet (package netguard): loopback,
// link-local (cloud metadata services), multicast, unspecified and
// reserved addresses, every address of the host's own interfaces (so that
// the daemon's API cannot be reached through the host's public address),
// and private ones unless allowPrivate. A refusal matches ErrDenied.
func GuardedDialer(timeout time.Duration, allowPrivate bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	g := netguard.Must(netguard.New(netguard.Config{AllowPrivate: allowPrivate, Subject: "sandboxes"}))
	return g.DialContext(timeout)
}

// deniedMessage is the text of the denial inside err.
func deniedMessage(err error) string {
	var d *deniedError
	if errors.As(err, &d) {
		return d.Msg
	}
	return err.Error()
}
