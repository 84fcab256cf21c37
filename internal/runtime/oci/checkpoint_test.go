package oci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/testenv"
)

// testCRIU returns $AGENT2ENV_CRIU, or the criu that make test-deps built
// (scripts/criu.sh).
func testCRIU(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENT2ENV_CRIU"); p != "" {
		return p
	}
	out, err := exec.Command("../../../scripts/criu.sh", "--path").Output()
	if err != nil {
		testenv.Missing(t, "the project's criu is not built: run make criu (scripts/criu.sh)")
	}
	return strings.TrimSpace(string(out))
}

func TestCheckpointRestore(t *testing.T) {
	runtimetest.RequiresRoot(t)
	criu := testCRIU(t)
	root := newRoot(t)
	rt := newRuntime(t, root, "runc")
	rt.cfg.CRIU = criu
	ctx := context.Background()
	startSandbox(t, rt, "parent")
	c := rt.client("parent")
	// A process holding a variable in memory only, which it writes out on
	// SIGUSR1; and a file.
	if code, out := run(t, c, `echo hello > /workspace/f
setsid sh -c 'x=41; trap "echo \$x > /workspace/out" USR1; while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &
echo $! > /workspace/pid`); code != 0 {
		t.Fatalf("setup: %d %s", code, out)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	start := time.Now()
	if err := rt.Checkpoint(ctx, "parent", snap, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint (live) took %v", time.Since(start))
	// The parent runs on; what it writes now is not in the snapshot.
	if code, out := run(t, rt.client("parent"), `echo changed > /workspace/f; kill -0 $(cat /workspace/pid) && echo alive`); code != 0 || !strings.Contains(out, "alive") {
		t.Fatalf("parent after checkpoint: %d %q", code, out)
	}
	for _, id := range []string{"child1", "child2"} {
		start = time.Now()
		if err := rt.Restore(ctx, id, snap, map[string]string{"from": "parent"}); err != nil {
			t.Fatal(err)
		}
		t.Logf("restore %s to an answering agent took %v", id, time.Since(start))
		code, out := run(t, rt.client(id), `cat /workspace/f; kill -USR1 $(cat /workspace/pid); sleep 0.5; cat /workspace/out`)
		if code != 0 || out != "hello\n41\n" {
			t.Errorf("%s: exit %d, output %q; want the snapshot's file and variable (hello, 41)", id, code, out)
		}
		st, err := rt.Status(ctx, id)
		if err != nil || st.Labels["from"] != "parent" {
			t.Errorf("Status(%s) = %+v, %v", id, st, err)
		}
	}
	if code, out := run(t, rt.client("parent"), `cat /workspace/f`); code != 0 || out != "changed\n" {
		t.Errorf("parent: %d %q; the children's writes must not reach it", code, out)
	}
	for _, id := range []string{"parent", "child1", "child2"} {
		if err := rt.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
	runtimetest.AssertNoLeaks(t, root)
}
