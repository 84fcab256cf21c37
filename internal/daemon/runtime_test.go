//go:build !no_oci

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// The runtime is chosen by name; an unknown one stops the daemon with the
// names it knows.
func TestUnknownRuntime(t *testing.T) {
	_, err := New(context.Background(), Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Runtime: "nosuch", Log: slog.New(slog.DiscardHandler),
	})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `unknown runtime "nosuch" (known: `) ||
		!strings.Contains(err.Error(), "oci") {
		t.Errorf("New with runtime nosuch = %v, want an error listing oci", err)
	}
}
