package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the api module free of the server: the wire contract and
// the SDK must build without anything under internal/ (tailscale's
// deptest).
func TestDeps(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test", "github.com/agent2env/agent2env/api/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 {
		t.Fatal("go list listed no packages")
	}
	for _, pkg := range pkgs {
		pkg = strings.TrimSuffix(pkg, ".test") // a package's test binary
		if pkg == "github.com/agent2env/agent2env" || strings.HasPrefix(pkg, "github.com/agent2env/agent2env/") &&
			pkg != "github.com/agent2env/agent2env/api" && !strings.HasPrefix(pkg, "github.com/agent2env/agent2env/api/") {
			t.Errorf("the api module depends on %s", pkg)
		}
	}
}
