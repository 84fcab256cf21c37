package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsCI(t *testing.T) {
	for v, want := range map[string]bool{
		"": false, "0": false, "false": false, "FALSE": false, " False ": false,
		"true": true, "1": true, "yes": true, "TRUE": true, "on": true,
	} {
		if got := IsCI(v); got != want {
			t.Errorf("IsCI(%q) = %v, want %v", v, got, want)
		}
	}
}

// helperEnv makes TestHelper run the gate it names, in a child process.
const helperEnv = "TESTENV_HELPER"

// TestHelper is the child of TestGates: it meets the gate $TESTENV_HELPER.
func TestHelper(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		return // not the child of TestGates
	case "missing":
		Missing(t, "the widget is not installed")
	case "skip":
		Skip(t, "this host has no widget slot")
	}
	t.Error("the gate returned")
}

// TestGates runs each gate in a child process under several values of
// CI: Missing fails under CI and skips elsewhere; Skip skips and, under
// CI, logs why.
func TestGates(t *testing.T) {
	for _, tt := range []struct {
		gate, ci string
		fail     bool
		logged   bool
	}{
		{gate: "missing", ci: "true", fail: true},
		{gate: "missing", ci: "1", fail: true},
		{gate: "missing", ci: "false"},
		{gate: "missing", ci: ""},
		{gate: "skip", ci: "1", logged: true},
		{gate: "skip", ci: "0"},
	} {
		t.Run(tt.gate+"/CI="+tt.ci, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "skips")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v")
			cmd.Env = append(os.Environ(), helperEnv+"="+tt.gate, "CI="+tt.ci, SkipLogEnv+"="+log)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tt.fail {
				t.Errorf("failed = %v (%v), want %v:\n%s", failed, err, tt.fail, out)
			}
			if !tt.fail && !strings.Contains(string(out), "--- SKIP: TestHelper") {
				t.Errorf("not skipped:\n%s", out)
			}
			b, _ := os.ReadFile(log)
			if logged := len(b) > 0; logged != tt.logged {
				t.Errorf("skip log %q, want logged %v", b, tt.logged)
			}
			if tt.logged && string(b) != "./internal/testenv TestHelper: this host has no widget slot\n" {
				t.Errorf("skip log %q", b)
			}
		})
	}
}
