package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a substring of it
		stderr string // a substring of it
	}{
		{"help", []string{"help"}, 0, "agent2env-agent install DST", ""},
		{"-h", []string{"-h"}, 0, "", "agent2env-agent hold"},
		{"install without a destination", []string{"install"}, 2, "", "usage:"},
		{"install into nowhere", []string{"install", filepath.Join(dir, "no", "such", "dir", "a")}, 1, "", "install agent"},
		{"an argument", []string{"--cwd=/", "serve"}, 2, "", `unexpected argument "serve"`},
		{"an unknown flag", []string{"--listen=:1"}, 2, "", "flag provided but not defined"},
		// The agent itself, without its listener: the error says so.
		{"agent without a listener", []string{"--uid=-1"}, 1, "", "neither AGENT2ENV_AGENT_FD nor AGENT2ENV_AGENT_LISTEN is set"},
		// The oci runtime's command line, that of "agent2env agent".
		{"agent2env agent's arguments", []string{"agent", "--uid=-1", "--gid=0", "--cwd=/"}, 1, "", "neither AGENT2ENV_AGENT_FD nor AGENT2ENV_AGENT_LISTEN is set"},
		{"agent and an argument", []string{"agent", "serve"}, 2, "", `unexpected argument "serve"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("run %q = %d, stdout %q, stderr %q; want %d, stdout with %q, stderr with %q",
					tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

func TestInstall(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "agent2env-agent")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"install", dst}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("install: exit %d: %s", code, stderr.String())
	}
	self, _ := os.ReadFile("/proc/self/exe")
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, self) {
		t.Errorf("installed %d bytes (%v), want the running binary's %d", len(got), err, len(self))
	}
}

// TestHold runs "hold" in a process of its own (this test binary again):
// it lives until SIGTERM, then exits 0, as the Pod's agent container must
// for the Pod to end without an error of its own.
func TestHold(t *testing.T) {
	if os.Getenv("AGENT2ENV_AGENT_TEST_HOLD") == "1" {
		os.Exit(hold(func() { fmt.Println("holding") }))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHold$")
	cmd.Env = append(os.Environ(), "AGENT2ENV_AGENT_TEST_HOLD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if line != "holding\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("hold: %q, %v", line, err)
	}
	exited := make(chan error, 1)
	go func() {
		_, _ = io.Copy(io.Discard, r)
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		t.Fatalf("hold exited by itself: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("hold after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("hold did not exit on SIGTERM")
	}
}
