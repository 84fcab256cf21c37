package oci

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestAgentUpgradedInPlace installs a new agent binary at the path the
// runtime took its agent from (a new file at the same path, as installing
// a new daemon over the old one does) and starts a new runtime on the same
// root, as the new daemon: the sandboxes of the old one are saved and
// restored by the new one, and so are the snapshots the old one took. The
// restored sandboxes run the agent they were saved with; a sandbox started
// again runs the new one.
func TestAgentUpgradedInPlace(t *testing.T) { forBinaries(t, testAgentUpgradedInPlace) }

func testAgentUpgradedInPlace(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	for _, tc := range []struct {
		name string
		// checkpointFirst: the old runtime takes the snapshot before the
		// upgrade; else the new one takes it of the old one's sandbox.
		checkpointFirst bool
	}{
		{"snapshot of a sandbox made before the upgrade", false},
		{"snapshot taken before the upgrade", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			root := newRoot(t)
			installed := filepath.Join(t.TempDir(), "agent2env")
			oldSize := installAgentFile(t, installed, 0)
			newCRIU := func() *Runtime { return newCRIURuntimeOf(t, root, bin, installed) }
			rt := newCRIU()
			startSandbox(t, rt, "old")
			if tmp, _ := filepath.Glob(filepath.Join(root, "old", "*.tmp")); len(tmp) > 0 {
				t.Errorf("sandbox dir holds %v after a start", tmp)
			}
			if code, out := run(t, rt.client("old"), `echo kept > /workspace/f`); code != 0 {
				t.Fatalf("setup: %d %s", code, out)
			}
			snap := filepath.Join(t.TempDir(), "snap")
			if tc.checkpointFirst {
				if err := rt.Checkpoint(ctx, "old", snap, true); err != nil {
					t.Fatal(err)
				}
			}
			// The old daemon exits: its connections to the agent go.
			rt.client("old").Close()
			rt.Close()
			newSize := installAgentFile(t, installed, 4096)
			rt = newCRIU()
			if _, err := rt.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if !tc.checkpointFirst {
				if err := rt.Checkpoint(ctx, "old", snap, true); err != nil {
					t.Fatalf("checkpoint of a sandbox running across the upgrade: %v", err)
				}
			}
			if err := rt.Restore(ctx, "restored", snap, nil); err != nil {
				t.Fatalf("restore after the upgrade: %v", err)
			}
			if code, out := run(t, rt.client("restored"), `cat /workspace/f`); code != 0 || out != "kept\n" {
				t.Errorf("restored sandbox: exit %d, output %q; want kept", code, out)
			}
			assertAgentSize(t, filepath.Join(root, "restored", fileAgent), oldSize)
			if err := rt.Stop(ctx, "old", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := rt.Start(ctx, "old"); err != nil {
				t.Fatal(err)
			}
			assertAgentSize(t, filepath.Join(root, "old", fileAgent), newSize)
			for _, id := range []string{"old", "restored"} {
				if err := rt.Delete(ctx, id); err != nil {
					t.Error(err)
				}
			}
			if err := os.RemoveAll(snap); err != nil {
				t.Fatal(err)
			}
			// The next runtime removes the old agent's copy, which nothing
			// links any more.
			newCRIU()
			if ents, err := os.ReadDir(filepath.Join(root, dirAgents)); err != nil || len(ents) != 1 {
				t.Errorf("%s holds %v (%v); want the current agent alone", dirAgents, ents, err)
			}
			runtimetest.AssertNoLeaks(t, root)
		})
	}
}

// installAgentFile puts a copy of agentBin with pad more bytes at path
// (ELF ignores them) as a new file, and returns its size.
func installAgentFile(t *testing.T, path string, pad int) int64 {
	t.Helper()
	in, err := os.Open(agentBin)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(path), "install-")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(out, in)
	if err == nil {
		_, err = out.Write(make([]byte, pad))
	}
	if err == nil {
		err = out.Chmod(0o755)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(out.Name(), path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n + int64(pad)
}

func assertAgentSize(t *testing.T, path string, want int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != want {
		t.Errorf("agent binary %s: %v, %v; want %d bytes", path, fi, err, want)
	}
}

// TestStartOldBundle starts a stopped sandbox whose bundle a runtime made
// before sandboxes had an agent of their own (it mounts the agent binary
// at its installed path): Start has it mount its own link to the current
// agent, and it runs.
func TestStartOldBundle(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	root := newRoot(t)
	rt := newRuntime(t, root, "runc")
	startSandbox(t, rt, "sb")
	if err := rt.Stop(ctx, "sb", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sb")
	var config specs.Spec
	if err := readJSONFile(filepath.Join(dir, fileConfig), &config); err != nil {
		t.Fatal(err)
	}
	agentMount(&config).Source = agentBin
	if err := writeJSONFile(filepath.Join(dir, fileConfig), &config); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, fileAgent)); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, rt.client("sb"), "echo up"); code != 0 || out != "up\n" {
		t.Errorf("the sandbox started again: %d %q", code, out)
	}
	if err := readJSONFile(filepath.Join(dir, fileConfig), &config); err != nil {
		t.Fatal(err)
	}
	own, err := os.Stat(filepath.Join(dir, fileAgent))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.Stat(rt.agent)
	if err != nil {
		t.Fatal(err)
	}
	if src := agentMount(&config).Source; src != filepath.Join(dir, fileAgent) || !os.SameFile(own, cur) {
		t.Errorf("the bundle mounts %s; want %s, a link to %s", src, filepath.Join(dir, fileAgent), rt.agent)
	}
	if err := rt.Delete(ctx, "sb"); err != nil {
		t.Error(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// TestLinkAgent: a link on one file system, a copy across two (a
// snapshot dir elsewhere), an existing dst replaced, and nothing left
// beside dst.
func TestLinkAgent(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "a2e-link-")
	if err != nil {
		testenv.Missing(t, "no /dev/shm to copy across file systems to: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	src := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(src, []byte("agent v2"), 0o555); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		dir      string
		existing string // content of a dst there before, "" for none; "=" for src itself
		wantLink bool
	}{
		{"same file system", t.TempDir(), "", true},
		{"other file system", shm, "", false},
		{"replaces another file", t.TempDir(), "agent v1", true},
		{"is src already", "", "=", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = t.TempDir()
			}
			dst := filepath.Join(dir, "agent")
			switch tc.existing {
			case "":
			case "=":
				if err := os.Link(src, dst); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.WriteFile(dst, []byte(tc.existing), 0o555); err != nil {
					t.Fatal(err)
				}
			}
			if err := linkAgent(src, dst); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(dst)
			if err != nil || string(b) != "agent v2" {
				t.Errorf("dst holds %q, %v; want src's", b, err)
			}
			si, _ := os.Stat(src)
			di, _ := os.Stat(dst)
			if os.SameFile(si, di) != tc.wantLink {
				t.Errorf("dst is a link of src: %v; want %v", !tc.wantLink, tc.wantLink)
			}
			if di.Mode().Perm() != 0o555 {
				t.Errorf("dst mode %v; want r-xr-xr-x", di.Mode())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("%s holds %v; want dst alone", dir, ents)
			}
		})
	}
}
