// Package runtimetest is the conformance suite of sandbox.Runtime: every
// runtime runs it (runtimetest.Run(t, factory)) in the manner of containerd's
// snapshotter test suite. RunContract checks the interface itself: the
// lifecycle and its states, errors, List, Capabilities, images, Recover
// and the states of a pause (where Capabilities claim it); test doubles
// that isolate nothing (package fakeruntime) pass it too. Run adds what a
// real sandbox must do: exec, files, limits, a pause that freezes its
// processes and keeps their memory and, each in its own test, that an
// abusive or escaping sandbox fails or stays contained and leaves its
// agent usable.
//
// The suite needs root on the oci runtime and a real image: NewSpec's image
// must provide busybox applets on PATH and the probe of testdata/probe at
// ProbePath and, setuid root, at SetuidProbePath (InstallProbes puts both
// into a layer directory). AssertNoLeaks checks that nothing of an oci
// runtime's sandboxes is left behind: containers, mounts, cgroups,
// processes, directories.
package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/testenv"
)

// Where the image of NewSpec has the probe, plain and setuid root.
const (
	ProbePath       = "/usr/local/bin/a2e-probe"
	SetuidProbePath = "/usr/local/bin/a2e-probe-suid"
)

// Factory gives the suite runtimes and specs.
type Factory struct {
	// New returns a Runtime on the suite's state. Every call must return
	// a new value on the same state: the Recover test drops one and
	// recovers with the next.
	New func(t *testing.T) sandbox.Runtime
	// NewSpec returns the spec of a sandbox with the given id and an image
	// as described in the package comment. The suite sets Resources.
	NewSpec func(t *testing.T, id string) *sandbox.Spec
	// Kill ends the agent of a running sandbox the way a crash would
	// (SIGKILL, an evicted pod), behind the runtime's back.
	Kill func(t *testing.T, rt sandbox.Runtime, id string)
	// EgressTargets prove the control that stands in for having no
	// network, for a runtime whose sandboxes have an interface under a
	// policy (Capabilities.LoopbackOnly false): once the policy of the
	// running sandbox id is in force, they are addresses the sandbox must
	// not reach, each of which answers a peer on the same network without
	// that policy (the factory checks it): another sandbox, the node, the
	// API server, a server of the test's own. Without them the suite's
	// "no network" case fails for such a runtime.
	EgressTargets func(t *testing.T, id string) []EgressTarget
}

// An EgressTarget is an address a sandbox must not reach.
type EgressTarget struct {
	Name string // what it is: "another pod", "the kubelet"
	Addr string // host:port, TCP
}

// RequiresRoot is [testenv.RequireRoot]: a test that needs root fails
// without it under CI, and is skipped elsewhere.
func RequiresRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
}

// Run runs the whole conformance suite against the runtimes of f: the
// contract and the sandbox's behaviour.
func Run(t *testing.T, f Factory) {
	RunContract(t, f)
	s := &suite{f: f}
	t.Run("Exec", s.testExec)
	t.Run("Files", s.testFiles)
	t.Run("Limits", s.testLimits)
	t.Run("Isolation", s.testIsolation)
	t.Run("PauseFreezes", s.testPauseFreezes)
	t.Run("Terminal", s.testTerminal)
}

// RunContract runs the part of the suite about the interface: states,
// errors, List, Capabilities, images and Recover. It runs no command that
// would touch the host were the sandbox not isolated.
func RunContract(t *testing.T, f Factory) {
	s := &suite{f: f}
	t.Run("Lifecycle", s.testLifecycle)
	t.Run("Errors", s.testErrors)
	t.Run("List", s.testList)
	t.Run("Capabilities", s.testCapabilities)
	t.Run("ClassesRefused", s.testClassesRefused)
	t.Run("Images", s.testImages)
	t.Run("Recover", s.testRecover)
	t.Run("Pause", s.testPause)
}

type suite struct {
	f Factory
}

// Resources of the sandboxes the suite makes: small, so that the abuse
// tests hit the limits fast.
var testResources = sandbox.Resources{
	MilliCPU:    500,
	MemoryBytes: 64 << 20,
	Pids:        64,
	DiskBytes:   64 << 20,
}

// newID returns a short id that is unique across runs.
func newID(t testing.TB) string {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "rt" + hex.EncodeToString(b)
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// spec returns a spec with the suite's resources.
func (s *suite) spec(t *testing.T) *sandbox.Spec {
	sp := s.f.NewSpec(t, newID(t))
	sp.Resources = testResources
	return sp
}

// started creates and starts a sandbox that is deleted when t ends.
func started(t testing.TB, rt sandbox.Runtime, sp *sandbox.Spec) *agent.Client {
	t.Helper()
	ctx := ctxFor(t)
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := rt.Delete(context.Background(), sp.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Delete %s: %v", sp.ID, err)
		}
	})
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatalf("Start: %v", err)
	}
	c, err := rt.Agent(ctx, sp.ID)
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	return c
}

// sandboxWith starts a sandbox of the suite's spec changed by edit.
func (s *suite) sandboxWith(t *testing.T, edit func(*sandbox.Spec)) (sandbox.Runtime, *sandbox.Spec, *agent.Client) {
	t.Helper()
	rt := s.f.New(t)
	sp := s.spec(t)
	if edit != nil {
		edit(sp)
	}
	return rt, sp, started(t, rt, sp)
}

// result is what one command did.
type result struct {
	agent.ExecResult
	stdout, stderr string
}

// sh runs a shell command with a timeout and returns what it did; an error
// of the exec call itself fails the test.
func sh(t *testing.T, c *agent.Client, script string, timeout time.Duration) result {
	t.Helper()
	return execReq(t, c, agent.ExecRequest{Shell: script, Timeout: timeout}, nil)
}

func execReq(t *testing.T, c *agent.Client, req agent.ExecRequest, stdin io.Reader) result {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := c.Exec(ctxFor(t), req, stdin, &out, &errb)
	if err != nil {
		t.Fatalf("exec %q%q: %v", req.Shell, req.Command, err)
	}
	return result{ExecResult: res, stdout: out.String(), stderr: errb.String()}
}

// mustSh runs script and fails the test unless it exits 0.
func mustSh(t *testing.T, c *agent.Client, script string) string {
	t.Helper()
	r := sh(t, c, script, 30*time.Second)
	if r.ExitCode != 0 {
		t.Fatalf("%q exited %d (%s): stdout %q stderr %q", script, r.ExitCode, r.Signal, r.stdout, r.stderr)
	}
	return r.stdout
}

// assertUsable checks that the sandbox's agent answers and runs commands,
// allowing a few seconds for an abusive workload to be cleaned up.
func assertUsable(t *testing.T, c *agent.Client) {
	t.Helper()
	ctx := ctxFor(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Info(ctx)
		var r agent.ExecResult
		var out bytes.Buffer
		if err == nil {
			r, err = c.Exec(ctx, agent.ExecRequest{Command: []string{"echo", "alive"}, Timeout: 5 * time.Second}, nil, &out, nil)
		}
		if err == nil && r.ExitCode == 0 && out.String() == "alive\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox not usable: err %v, result %+v, output %q", err, r, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// InstallProbes builds the probe of testdata/probe, a static binary that
// tries forbidden system calls, into the layer directory dir at ProbePath
// and, setuid root, at SetuidProbePath. It needs root and the go command.
func InstallProbes(t testing.TB, dir string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	plain, setuid := filepath.Join(dir, ProbePath), filepath.Join(dir, SetuidProbePath)
	cmd := exec.Command("go", "build", "-o", plain, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "testdata", "probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v: %s", err, out)
	}
	b, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(setuid, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, setuid} {
		if err := os.Lchown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(setuid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
}

// lines splits command output into trimmed non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
