// Package contextstest is what the tests of the contexts service and of
// the services built on it (sessions) share: a real manager over a fake
// runtime (in-process agents running the host's python3, node and bash)
// and a sqlite store, fake image stores, and checks of what exists.
//
// Tests using it must not start processes with os/exec: the in-process
// agents' reaper waits for every child of the test binary.
package contextstest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

var bg = context.Background()

// Images knows every image; images have no layers, and run what the
// host's PATH has.
type Images struct{}

func (Images) Get(ctx context.Context, ref string) (*image.Image, error) {
	return &image.Image{Ref: ref}, nil
}

func (Images) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return &image.Image{Ref: ref}, nil
}

// InterpreterImages are images that run only the interpreters each has:
// an image's PATH is a directory holding a wrapper of each of its
// interpreters (which runs the host's with the host's PATH). Images it
// does not list are unknown.
type InterpreterImages map[string]string // normalized ref -> its PATH

// NewInterpreterImages makes the PATH directory of each image, given the
// interpreters (python3, node, bash) it has.
func NewInterpreterImages(t *testing.T, images map[string][]string) InterpreterImages {
	t.Helper()
	out := InterpreterImages{}
	for ref, progs := range images {
		dir := filepath.Join(t.TempDir(), "bin")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, prog := range progs {
			host, err := exec.LookPath(prog) // looks, starts nothing
			if err != nil {
				t.Fatalf("the tests need %s on the host: %v", prog, err)
			}
			script := fmt.Sprintf("#!/bin/sh\nPATH=%q exec %q \"$@\"\n", os.Getenv("PATH"), host)
			if err := os.WriteFile(filepath.Join(dir, prog), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		out[ref] = dir
	}
	return out
}

func (im InterpreterImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	norm, err := image.Normalize(ref)
	if err != nil {
		return nil, err
	}
	path, ok := im[norm]
	if !ok {
		return nil, errdefs.NotFound("image %s not found", ref)
	}
	return &image.Image{Ref: norm, Config: image.Config{Env: []string{"PATH=" + path}}}, nil
}

func (im InterpreterImages) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return im.Get(ctx, ref)
}

// Env is a manager over a fake runtime and a sqlite store, closed when
// the test ends.
type Env struct {
	M  *manager.Manager
	St store.Store
	Rt *fakeruntime.Runtime
}

// NewEnv returns an Env; images nil is Images. A zero StartTimeout is 10 s.
func NewEnv(t *testing.T, cfg manager.Config, images runtime.Images) *Env {
	t.Helper()
	if images == nil {
		images = Images{}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Host == (manager.Host{}) { // not the test machine's: tests make many sandboxes
		cfg.Host = manager.Host{MilliCPU: 1 << 20, MemoryBytes: 1 << 50}
	}
	st, err := sqlite.Open(bg, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	rt := fakeruntime.New(fakeruntime.WithImages(images))
	m := manager.New(cfg, rt, st, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		m.Close()
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
		st.Close()
	})
	return &Env{M: m, St: st, Rt: rt}
}

// Sandbox creates a running sandbox through the manager.
func (e *Env) Sandbox(t *testing.T) *store.Sandbox {
	t.Helper()
	sb, err := e.M.Create(bg, manager.CreateRequest{Image: "agent2env/python"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != string(api.StatusRunning) {
		t.Fatalf("sandbox %s is %s: %s", sb.ID, sb.Status, sb.Reason)
	}
	return sb
}

// Sandboxes returns the ids of every sandbox record.
func (e *Env) Sandboxes(t *testing.T) []string {
	t.Helper()
	all, err := e.St.ListSandboxes(bg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, sb := range all {
		ids = append(ids, sb.ID)
	}
	return ids
}

// Contexts returns the ids of every context record.
func (e *Env) Contexts(t *testing.T) []string {
	t.Helper()
	all, err := e.St.ListContexts(bg, store.ContextFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, c := range all {
		ids = append(ids, c.ID)
	}
	return ids
}

// Context returns the record of context id.
func (e *Env) Context(t *testing.T, id string) *store.Context {
	t.Helper()
	c, err := e.St.GetContext(bg, id)
	if err != nil {
		t.Fatalf("context record %s: %v", id, err)
	}
	return c
}

// Kernels returns the ids of the kernels the agent of sandbox id runs.
func (e *Env) Kernels(t *testing.T, id string) []string {
	t.Helper()
	ac, err := e.M.Agent(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ac.Kernels(bg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	return ids
}

// SandboxExists reports whether sandbox id has a record.
func (e *Env) SandboxExists(t *testing.T, id string) bool {
	t.Helper()
	_, err := e.M.Get(bg, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// CheckErr fails the test unless err is of class (when not nil) and
// carries code (when not empty).
func CheckErr(t *testing.T, err, class error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v (%s)", class, code)
	}
	if class != nil && !errors.Is(err, class) {
		t.Errorf("error %q is not %v", err, class)
	}
	if code != "" && errdefs.Code(err) != code {
		t.Errorf("error %q has code %q, want %q", err, errdefs.Code(err), code)
	}
}
