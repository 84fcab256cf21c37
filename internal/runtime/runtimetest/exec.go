package runtimetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/testenv"
)

func (s *suite) testExec(t *testing.T) {
	_, _, c := s.sandboxWith(t, func(sp *sandbox.Spec) { sp.Env = append(sp.Env, "SPEC_VAR=from-spec") })
	for _, tc := range []struct {
		name       string
		req        agent.ExecRequest
		stdin      string
		wantCode   int
		wantOut    string
		wantErr    string
		wantTimout bool
	}{
		{name: "exit code", req: agent.ExecRequest{Shell: "exit 3"}, wantCode: 3},
		{name: "argv", req: agent.ExecRequest{Command: []string{"echo", "a b", "c"}}, wantOut: "a b c\n"},
		{name: "stdout and stderr apart", req: agent.ExecRequest{Shell: "echo out; echo err >&2"}, wantOut: "out\n", wantErr: "err\n"},
		{name: "stdin", req: agent.ExecRequest{Command: []string{"cat"}, Stdin: true}, stdin: "hello\x00world", wantOut: "hello\x00world"},
		{name: "no stdin is empty", req: agent.ExecRequest{Command: []string{"cat"}}, wantOut: ""},
		{name: "request env", req: agent.ExecRequest{Shell: "echo $FOO", Env: []string{"FOO=bar"}}, wantOut: "bar\n"},
		{name: "spec env", req: agent.ExecRequest{Shell: "echo $SPEC_VAR"}, wantOut: "from-spec\n"},
		{name: "home", req: agent.ExecRequest{Shell: "echo $HOME"}, wantOut: sandbox.HomeDir + "\n"},
		{name: "default cwd", req: agent.ExecRequest{Command: []string{"pwd"}}, wantOut: sandbox.WorkDir + "\n"},
		{name: "cwd", req: agent.ExecRequest{Command: []string{"pwd"}, Cwd: "/tmp"}, wantOut: "/tmp\n"},
		{name: "not found", req: agent.ExecRequest{Command: []string{"no-such-command"}}, wantCode: 127},
		{name: "shell not found", req: agent.ExecRequest{Shell: "no-such-command"}, wantCode: 127},
		{name: "killed by signal", req: agent.ExecRequest{Shell: "kill -9 $$"}, wantCode: 137},
		{name: "timeout", req: agent.ExecRequest{Shell: "echo started; sleep 60", Timeout: 300 * time.Millisecond},
			wantCode: 137, wantOut: "started\n", wantTimout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdin io.Reader
			if tc.stdin != "" {
				stdin = strings.NewReader(tc.stdin)
			}
			r := execReq(t, c, tc.req, stdin)
			if r.ExitCode != tc.wantCode || r.stdout != tc.wantOut || r.TimedOut != tc.wantTimout {
				t.Errorf("got exit %d timedOut %v stdout %q (stderr %q), want exit %d timedOut %v stdout %q",
					r.ExitCode, r.TimedOut, r.stdout, r.stderr, tc.wantCode, tc.wantTimout, tc.wantOut)
			}
			if tc.wantErr != "" && r.stderr != tc.wantErr {
				t.Errorf("stderr = %q, want %q", r.stderr, tc.wantErr)
			}
		})
	}

	t.Run("timeout kills the process group", func(t *testing.T) {
		r := sh(t, c, "sleep 61 & sleep 62 & (sleep 63 &) ; sleep 64", 300*time.Millisecond)
		if !r.TimedOut {
			t.Fatalf("command was not timed out: %+v", r)
		}
		if out := sh(t, c, "ps -o args | grep 'sleep 6[1-4]' | grep -v grep", 10*time.Second).stdout; out != "" {
			t.Errorf("processes survived the timeout:\n%s", out)
		}
	})
}

func (s *suite) testFiles(t *testing.T) {
	ctx := ctxFor(t)
	rt, sp, c := s.sandboxWith(t, nil)

	t.Run("upload and download", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			path string
			size int
		}{
			{"empty", "/workspace/empty", 0},
			{"small", "/tmp/small.txt", 13},
			{"10 MB binary in new dirs", "/workspace/deep/er/big.bin", 10 << 20},
			{"home", sandbox.HomeDir + "/h.bin", 4096},
		} {
			t.Run(tc.name, func(t *testing.T) {
				data := make([]byte, tc.size)
				_, _ = rand.Read(data)
				fi, err := c.Upload(ctx, tc.path, 0o640, bytes.NewReader(data))
				if err != nil {
					t.Fatalf("Upload: %v", err)
				}
				if fi.Size != int64(tc.size) || fi.Mode.Perm() != 0o640 {
					t.Errorf("uploaded file info %+v, want size %d mode 0640", fi, tc.size)
				}
				rc, n, err := c.Download(ctx, tc.path)
				if err != nil {
					t.Fatalf("Download: %v", err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatalf("read download: %v", err)
				}
				if !bytes.Equal(got, data) || n != int64(tc.size) {
					t.Errorf("download differs: %d bytes (length %d), want %d", len(got), n, tc.size)
				}
				if owner := mustSh(t, c, "stat -c %u:%g "+tc.path); owner != "1000:1000\n" {
					t.Errorf("uploaded file owned by %q, want 1000:1000", owner)
				}
			})
		}
	})

	t.Run("stat list mkdir move remove", func(t *testing.T) {
		if err := c.Mkdir(ctx, "/workspace/a/b/c", true); err != nil {
			t.Fatalf("Mkdir: %v", err)
		}
		if err := c.Mkdir(ctx, "/workspace/x/y", false); !agent.IsNotFound(err) {
			t.Errorf("Mkdir without parents = %v, want not found", err)
		}
		if _, err := c.Upload(ctx, "/workspace/a/f.txt", 0o644, strings.NewReader("f")); err != nil {
			t.Fatalf("Upload: %v", err)
		}
		ents, err := c.List(ctx, "/workspace/a")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name)
		}
		if strings.Join(names, ",") != "b,f.txt" {
			t.Errorf("List = %v, want [b f.txt]", names)
		}
		if err := c.Move(ctx, "/workspace/a/f.txt", "/workspace/a/b/g.txt"); err != nil {
			t.Fatalf("Move: %v", err)
		}
		fi, err := c.Stat(ctx, "/workspace/a/b/g.txt")
		if err != nil || fi.Size != 1 || fi.IsDir {
			t.Errorf("Stat moved file = %+v, %v", fi, err)
		}
		if _, err := c.Stat(ctx, "/workspace/a/f.txt"); !agent.IsNotFound(err) {
			t.Errorf("Stat of moved-away file = %v, want not found", err)
		}
		if err := c.Remove(ctx, "/workspace/a", false); err == nil {
			t.Error("non-recursive Remove of a non-empty dir succeeded")
		}
		if err := c.Remove(ctx, "/workspace/a", true); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if _, err := c.Stat(ctx, "/workspace/a"); !agent.IsNotFound(err) {
			t.Errorf("Stat of removed dir = %v, want not found", err)
		}
	})

	t.Run("read-only root refuses uploads", func(t *testing.T) {
		_, err := c.Upload(ctx, "/etc/evil", 0o644, strings.NewReader("x"))
		if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("Upload to /etc = %v, want ErrPermissionDenied", err)
		}
	})

	t.Run("download of a missing file", func(t *testing.T) {
		_, _, err := c.Download(ctx, path.Join(sandbox.WorkDir, "missing"))
		if !agent.IsNotFound(err) {
			t.Errorf("Download = %v, want not found", err)
		}
	})

	t.Run("uploads stay in the sandbox", func(t *testing.T) {
		if _, err := os.Stat("/workspace/deep/er/big.bin"); err == nil {
			t.Error("an upload appeared on the host")
		}
	})

	t.Run("kept across stop and start", func(t *testing.T) {
		if !rt.Capabilities().StopKeepsFiles {
			testenv.Skip(t, "%s does not keep files across Stop (Capabilities)", rt.Name())
		}
		mustSh(t, c, "echo kept > /workspace/k && echo kept > $HOME/k")
		if err := rt.Stop(ctx, sp.ID, 5*time.Second); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := rt.Start(ctx, sp.ID); err != nil {
			t.Fatalf("Start: %v", err)
		}
		if got := mustSh(t, c, "cat /workspace/k $HOME/k"); got != "kept\nkept\n" {
			t.Errorf("files after Stop and Start = %q, want them kept", got)
		}
	})
}
