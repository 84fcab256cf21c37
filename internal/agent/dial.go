package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// dialProtocol is the Upgrade token of GET /v1/dial: after the agent's
// 101 answer the connection carries the bytes of a TCP connection to a
// port on the sandbox's loopback.
const dialProtocol = "agent2env-dial"

// dialTimeout bounds the agent's connect to a sandbox port.
const dialTimeout = 10 * time.Second

// handleDial connects to 127.0.0.1:port in the sandbox (falling back to
// [::1] for servers that listen only there) and turns the request's
// connection into a pipe to it.
func (s *Server) handleDial(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("port %q is not a port number", r.URL.Query().Get("port")))
		return
	}
	if slices.Contains(s.reserved, port) {
		writeError(w, http.StatusForbidden, "RESERVED_PORT",
			fmt.Errorf("port %d serves agent2env's services to the sandbox's own programs and is not reachable from outside it", port))
		return
	}
	if !upgrading(w, r, dialProtocol) {
		return
	}
	target, err := dialLoopback(r.Context(), port)
	if err != nil {
		writeError(w, http.StatusBadGateway, "DIAL_FAILED", err)
		return
	}
	conn, err := switchProtocols(w, dialProtocol)
	if err != nil {
		target.Close()
		return
	}
	splice(conn, target)
}

// switchProtocols takes over the request's connection and answers 101 to
// protocol on it. On an error it has answered or closed the connection.
func switchProtocols(w http.ResponseWriter, protocol string) (net.Conn, error) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", fmt.Errorf("take over connection: %w", err))
		return nil, err
	}
	// The answer to an idle connection fits its buffers; a peer that does
	// not read it is gone.
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	_, err = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n")
	if err == nil {
		err = brw.Flush()
	}
	if err == nil {
		// The server's read deadline still holds on a hijacked connection.
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return withBuffered(conn, brw.Reader), nil
}

// dialLoopback connects to port on the sandbox's loopback.
func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	return dialLoopbackWith(ctx, d.DialContext, port)
}

// dialFunc dials as net.Dialer's DialContext does.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialLoopbackWith connects to 127.0.0.1:port with dial and, only when
// that is refused, to [::1]:port; when both fail the error is the IPv4
// one. (The dial is a parameter so that the rule is tested without an
// IPv6 loopback on the test's host.)
func dialLoopbackWith(ctx context.Context, dial dialFunc, port int) (net.Conn, error) {
	p := strconv.Itoa(port)
	c, err := dial(ctx, "tcp4", "127.0.0.1:"+p)
	if errors.Is(err, syscall.ECONNREFUSED) {
		if c6, err6 := dial(ctx, "tcp6", "[::1]:"+p); err6 == nil {
			return c6, nil
		}
	}
	return c, err
}

// upgrading checks that r asks to switch to protocol, and answers it if
// not.
func upgrading(w http.ResponseWriter, r *http.Request, protocol string) bool {
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), protocol) {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("%s needs Connection: Upgrade and Upgrade: %s", r.URL.Path, protocol))
		return false
	}
	return true
}

// headerHas reports whether the comma-separated header key lists token.
func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// DialPort connects to port on the sandbox's loopback, through the agent:
// the returned connection carries the bytes of a TCP connection to
// 127.0.0.1:port inside the sandbox, and supports CloseWrite. ctx bounds
// the connect only. A port nothing listens on is an ErrUnavailable.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Invalid("dial port %d: not a port number", port)
	}
	return c.open(ctx, "/v1/dial?port="+strconv.Itoa(port), dialProtocol, fmt.Sprintf("dial port %d", port))
}

// open sends the upgrade request GET path for protocol on a connection of
// its own and returns the connection once the agent has switched to the
// protocol. ctx bounds the wait for the switch; what names the request in
// errors.
func (c *Client) open(ctx context.Context, path, protocol, what string) (net.Conn, error) {
	// The transport's dialer is the client's DialFunc; the connection is
	// taken out of HTTP, so it must not come from the pool.
	conn, err := c.tr.DialContext(ctx, "unix", "agent")
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.lost("reach agent", err)
	}
	// A cancelled ctx interrupts the exchange below.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	nc, err := c.upgrade(conn, path, protocol, what)
	if !stop() {
		if nc != nil {
			nc.Close()
		} else {
			conn.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return nc, nil
}

// upgrade sends the upgrade request on conn and returns conn as the pipe
// the agent switched it to.
func (c *Client) upgrade(conn net.Conn, path, protocol, what string) (net.Conn, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if err := req.Write(conn); err != nil {
		return nil, c.lost(what, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, c.lost(what, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, fmt.Errorf("%s: %w", what, decodeError(resp))
	}
	return withBuffered(conn, br), nil
}

// withBuffered returns c reading first what br (a reader on c) holds.
func withBuffered(c net.Conn, br *bufio.Reader) net.Conn {
	n := br.Buffered()
	if n == 0 {
		return c
	}
	return &bufferedConn{Conn: c, r: io.MultiReader(io.LimitReader(br, int64(n)), c)}
}

// bufferedConn is a connection some of whose input was read ahead.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection where the underlying one can.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
