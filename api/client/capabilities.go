package client

import (
	"context"
	"net/http"

	"github.com/agent2env/agent2env/api"
)

// Capabilities returns what the daemon's runtime can do where runtimes
// differ: pause, snapshots (GET /api/v1/capabilities).
func (c *Client) Capabilities(ctx context.Context) (api.Capabilities, error) {
	var caps api.Capabilities
	if err := c.doJSON(ctx, http.MethodGet, "/capabilities", nil, &caps); err != nil {
		return api.Capabilities{}, wrapf(err, "get capabilities")
	}
	return caps, nil
}
