package manager

import (
	"context"
	"fmt"
	"net"

	"github.com/agent2env/agent2env/api"
)

// Lookup returns the access token of sandbox id and whether it is
// running, for the port gateway. An unknown id is an ErrNotFound.
func (m *Manager) Lookup(ctx context.Context, id string) (token string, running bool, err error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return "", false, err
	}
	return sb.AccessToken, sb.Status == string(api.StatusRunning), nil
}

// Dial connects to 127.0.0.1:port inside running sandbox id, for the port
// gateway. A sandbox that is not running is an ErrFailedPrecondition, a
// port nothing listens on an ErrUnavailable.
func (m *Manager) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	conn, err := c.DialPort(ctx, port)
	if err != nil {
		return nil, fmt.Errorf("dial port %d of sandbox %s: %w", port, id, err)
	}
	return conn, nil
}
