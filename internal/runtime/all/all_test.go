//go:build !no_oci

package all

import (
	"slices"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime"
)

func TestRegistered(t *testing.T) {
	if names := runtime.Names(); !slices.Contains(names, "oci") {
		t.Errorf("registered runtimes %v lack oci", names)
	}
}
