package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// envRunAgent, set in the environment of this test binary, makes it the
// agent instead (see TestMain and runAgentProcess).
const envRunAgent = "AGENT2ENV_TEST_RUN_AGENT"

// sandboxUser is the user of a sandbox's commands, sandboxUser and
// GroupID (which imports this package).
const sandboxUser = 1000

// runAgentProcess runs the agent as a Pod's container starts it: exec'd
// as the sandbox user, whose commands run as that user too. Run as root,
// it becomes that user first and then dumpable again, as an exec as that
// user would have left it (the kernel makes a process that changes its
// user non-dumpable, which would hide what Run must do).
func runAgentProcess() int {
	os.Unsetenv(envRunAgent)
	if os.Geteuid() == 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return fail(err)
		}
		if err := syscall.Setgid(sandboxUser); err != nil {
			return fail(err)
		}
		if err := syscall.Setuid(sandboxUser); err != nil {
			return fail(err)
		}
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
			return fail(err)
		}
	}
	return fail(Run(context.Background(), Options{UID: -1, GID: -1, Cwd: "/"}))
}

// fail reports err, if any, and returns the exit status it means.
func fail(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "test agent:", err)
		return 1
	}
	return 0
}

// TestRunNotDumpable: the agent's credentials reach its commands neither
// in their environment nor through /proc/<agent>, whose files the kernel
// opens to a process of the same user only while the agent is dumpable;
// its commands are themselves dumpable (an exec resets the flag), and the
// agent still gives them their OOM score.
func TestRunNotDumpable(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	lf, err := ul.File()
	if err != nil {
		t.Fatal(err)
	}
	token, key := "token-"+rand.Text(), "key-"+rand.Text()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), envRunAgent + "=1",
		EnvListenFD + "=3", EnvToken + "=" + token, EnvTLSKey + "=" + key}
	cmd.ExtraFiles = []*os.File{lf}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	l.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		// ECHILD: the reaper of an agent server of this test binary, which
		// waits for every child of the process, had it first.
		if err := cmd.Wait(); err != nil && !errors.Is(err, syscall.ECHILD) {
			t.Errorf("agent: %v; its output:\n%s", err, log.String())
		}
	})
	c := NewClient(UnixDialer(sock), token)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := c.Info(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the agent does not answer: %v; its output:\n%s", err, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sh := func(script string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		res, err := c.Exec(ctx, ExecRequest{Shell: script}, nil, &out, &out)
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return res.ExitCode, out.String()
	}
	agent := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	if code, out := sh("id -u; stat -c %u " + agent); code != 0 || out != fmt.Sprintf("%[1]d\n%[1]d\n", os.Getuid()) &&
		out != fmt.Sprintf("%[1]d\n%[1]d\n", sandboxUser) {
		t.Fatalf("id and the owner of %s = %d %q, want the command and the agent of one user", agent, code, out)
	}
	for _, tc := range []struct{ name, script string }{
		{"environ", "cat " + agent + "/environ"},
		{"mem read-write", "exec 3<>" + agent + "/mem"},
		{"mem", "exec 3<" + agent + "/mem"},
		{"maps", "cat " + agent + "/maps"},
		{"fd", "ls " + agent + "/fd"},
		{"root", "ls " + agent + "/root/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, out := sh(tc.script); code == 0 || !strings.Contains(out, "Permission denied") {
				t.Errorf("%s: exit %d, output %q; want permission denied", tc.script, code, out)
			}
		})
	}
	if code, out := sh("cat /proc/self/environ; echo; cat /proc/self/oom_score_adj"); code != 0 ||
		!strings.Contains(out, "PATH=") || !strings.HasSuffix(out, "\n"+strconv.Itoa(userOOMScore)+"\n") {
		t.Errorf("a command's own environ and oom_score_adj: exit %d, %q; want them readable, and %d", code, out, userOOMScore)
	}
	if code, out := sh("env"); code != 0 || strings.Contains(out, token) || strings.Contains(out, key) || strings.Contains(out, "AGENT2ENV_AGENT_") {
		t.Errorf("a command's environment: exit %d, %q; want none of the agent's", code, out)
	}
}

func TestEnvForCommands(t *testing.T) {
	kubelet := []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1"}
	own := []string{"PATH=/usr/bin:/bin", "HOME=/home/user", "KUBECONFIG=/workspace/kubeconfig", "KUBERNETES_VERSION=1.36"}
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"the agent's own go", append([]string{EnvListen + "=:44772", EnvToken + "=t"}, own...), own},
		{"no kubelet: its names are the sandbox's", append(slices.Clone(own), kubelet...), append(slices.Clone(own), kubelet...)},
		{"the kubelet's go", append(append([]string{EnvKubelet + "="}, own...), kubelet...), own},
		{"but those the sandbox set", append(append([]string{EnvKubelet + "=KUBERNETES_SERVICE_HOST"}, own...), "KUBERNETES_SERVICE_HOST=api.example"),
			append(slices.Clone(own), "KUBERNETES_SERVICE_HOST=api.example")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := envForCommands(tt.env); !slices.Equal(got, tt.want) {
				t.Errorf("envForCommands(%q)\n = %q\nwant %q", tt.env, got, tt.want)
			}
		})
	}
	if got := KubeletKeep(append(slices.Clone(own), "KUBERNETES_SERVICE_HOST=api", "KUBERNETES_PORT=tcp://api:443")); got != "KUBERNETES_SERVICE_HOST,KUBERNETES_PORT" {
		t.Errorf("KubeletKeep = %q", got)
	}
}
