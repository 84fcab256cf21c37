package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/daemon/supervisor"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/testenv"
)

// tinyRef is the image the tests' sandboxes are made from, imported by
// importTiny: no registry is reached.
const tinyRef = "example.com/tiny:1"

// testDaemon is a System serving on a loopback port.
type testDaemon struct {
	t      *testing.T
	sys    *System
	addr   string
	api    *client.Client
	log    *testenv.Buffer
	cancel context.CancelFunc // what a signal does
	served chan error         // Serve's result
	once   sync.Once
}

// testConfig is a daemon's configuration on dataDir with rt as its
// runtime, shared across restarts as running sandboxes outlive a daemon.
func testConfig(dataDir string, rt *fakeruntime.Runtime) Config {
	return Config{DataDir: dataDir, ShutdownTimeout: 10 * time.Second, runtime: rt}
}

// twoKeys turns API keys on in cfg and returns two of them.
func twoKeys(t *testing.T, cfg *Config) (keyA, keyB string) {
	t.Helper()
	keyA, keyB = auth.NewKey(), auth.NewKey()
	keys, err := auth.NewKeys(keyA, keyB)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keys = keys
	return keyA, keyB
}

// as returns a client of d's API that presents key.
func (d *testDaemon) as(key string) *client.Client {
	d.t.Helper()
	c, err := client.New("http://"+d.addr, client.WithToken(key))
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// start builds a System from cfg on a loopback port, lets before (when not
// nil) change it, serves it and waits until it is ready. The test's end
// stops it if the test did not, then deletes what sandboxes its runtime
// still holds (a fake runtime's are directories under $TMPDIR, which a
// stopped daemon leaves, as a real one leaves its sandboxes running).
func start(t *testing.T, cfg Config, before func(*System)) *testDaemon {
	t.Helper()
	if c, ok := cfg.runtime.(io.Closer); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("delete the test's sandboxes: %v", err)
			}
		})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{t: t, addr: l.Addr().String(), log: &testenv.Buffer{}, served: make(chan error, 1)}
	cfg.Listen = d.addr
	cfg.Log = slog.New(slog.NewTextHandler(d.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if d.sys, err = New(ctx, cfg); err != nil {
		l.Close()
		t.Fatalf("New: %v", err)
	}
	if before != nil {
		before(d.sys)
	}
	go func() { d.served <- d.sys.Serve(ctx, l) }()
	t.Cleanup(func() { d.stop() })
	if d.api, err = client.New("http://" + d.addr); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if resp, err := http.Get("http://" + d.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon not ready after 10s")
		}
	}
}

// stop does what SIGTERM does to `agent2env serve`: it ends Serve's
// context, waits for Serve to return (at most 20s) and closes the System.
// It returns Serve's error joined with Close's.
func (d *testDaemon) stop() error {
	var err error
	d.once.Do(func() {
		d.cancel()
		select {
		case err = <-d.served:
		case <-time.After(20 * time.Second):
			d.t.Fatal("Serve still running 20s after its context ended")
		}
		err = errors.Join(err, d.sys.Close())
	})
	return err
}

// importTiny stores tinyRef, a one-file image, in the daemon's image store.
func (d *testDaemon) importTiny() {
	d.t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	body := []byte("tiny\n")
	if err := tw.WriteHeader(&tar.Header{Name: "etc/tiny", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		d.t.Fatal(err)
	}
	tw.Write(body)
	tw.Close()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(layer.Bytes(), types.DockerLayer))
	if err != nil {
		d.t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		d.t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		d.t.Fatal(err)
	}
	path := filepath.Join(d.t.TempDir(), "tiny.tar")
	if err := tarball.WriteToFile(path, name.MustParseReference(tinyRef), img); err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.sys.Images.Import(context.Background(), path, nil); err != nil {
		d.t.Fatal(err)
	}
}

// create makes a sandbox from req and checks that it runs.
func (d *testDaemon) create(req api.CreateSandboxRequest) *api.Sandbox {
	d.t.Helper()
	sb, err := d.api.Sandbox.Create(context.Background(), req)
	if err != nil {
		d.t.Fatalf("create sandbox: %v", err)
	}
	if sb.Status != api.StatusRunning {
		d.t.Fatalf("new sandbox %s is %s: %s", sb.ID, sb.Status, sb.Reason)
	}
	return sb
}

// A daemon starts, serves, shuts down leaving the store clean, and starts
// again on the same data directory with what it held: the sandbox, which
// kept running, is re-adopted and the template is there. Warm pools, which
// need the manager and which the manager's creates take from, are wired
// both ways: a create takes the warm sandbox, and shutdown deletes the
// sandboxes left waiting.
func TestRestartKeepsState(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })

	d := start(t, testConfig(dataDir, rt), nil)
	d.importTiny()
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef})
	if _, err := d.api.Template.Create(ctx, api.CreateTemplateRequest{Name: "tiny", Spec: api.TemplateSpec{Image: tinyRef}}); err != nil {
		t.Fatalf("create template: %v", err)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// Closing the store checkpoints the write-ahead log into the database
	// and removes it: what a clean close leaves.
	if _, err := os.Stat(filepath.Join(dataDir, "state.db-wal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.db-wal after shutdown: %v, want none (store not closed cleanly)", err)
	}

	cfg := testConfig(dataDir, rt)
	cfg.WarmPools = map[string]int{"tiny": 1}
	d = start(t, cfg, nil)
	got, err := d.api.Sandbox.Get(ctx, sb.ID)
	if err != nil || got.Status != api.StatusRunning {
		t.Fatalf("sandbox after restart: %+v, %v; want it running", got, err)
	}
	if tpl, err := d.api.Template.Get(ctx, "tiny"); err != nil || tpl.Spec.Image != tinyRef {
		t.Fatalf("template after restart: %+v, %v", tpl, err)
	}
	waitPool(t, d.sys, "tiny", 1)
	warm := d.create(api.CreateSandboxRequest{Template: "tiny"})
	if st := d.sys.Pools.Stats(); len(st) != 1 || st[0].Hits != 1 {
		t.Errorf("pool stats after a create from its template: %+v, want one hit", st)
	}
	waitPool(t, d.sys, "tiny", 1) // refilled
	// The API's stats report the pool (the console's overview shows it).
	if st, err := d.api.Stats(ctx); err != nil || !cmp.Equal(st.WarmPools, []api.WarmPool{{Name: "tiny", Ready: 1, Size: 1, Hits: 1}}) {
		t.Errorf("stats' warm pools: %+v, %v; want tiny with 1 of 1 ready and one hit", st, err)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	live, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range live {
		ids = append(ids, st.ID)
	}
	want := []string{sb.ID, warm.ID}
	slices.Sort(ids)
	slices.Sort(want)
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("sandboxes left after shutdown (-want +got), the waiting warm one must go:\n%s", diff)
	}
}

// A data dir is one daemon's: a second daemon on it is refused at once,
// naming the first, and nothing of the first's changes; once the first
// stops, the data dir is free again.
func TestDataDirLocked(t *testing.T) {
	dataDir := t.TempDir()
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	d := start(t, testConfig(dataDir, rt), nil)
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef})

	cfg := testConfig(dataDir, rt)
	cfg.Listen = "127.0.0.1:1"
	_, err := New(context.Background(), cfg)
	want := fmt.Sprintf("is in use by another agent2env daemon (pid %d, listening on %s)", os.Getpid(), d.addr)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a second daemon on the data dir: %v, want an error saying %q", err, want)
	}
	if got, err := d.api.Sandbox.Get(context.Background(), sb.ID); err != nil || got.Status != api.StatusRunning {
		t.Errorf("the first daemon's sandbox after the refusal: %+v, %v", got, err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d = start(t, testConfig(dataDir, rt), nil)
	if got, err := d.api.Sandbox.Get(context.Background(), sb.ID); err != nil || got.Status != api.StatusRunning {
		t.Errorf("the sandbox once the data dir was free again: %+v, %v", got, err)
	}
}

// waitPool waits until pool name has n sandboxes ready.
func waitPool(t *testing.T, s *System, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		for _, st := range s.Pools.Stats() {
			if st.Name == name && st.Ready == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("warm pool %s: %+v, want %d ready", name, s.Pools.Stats(), n)
		}
	}
}

// blockExecs makes every exec in rt wait, once it reaches the agent, until
// the returned release is called; entered receives each exec's sandbox id.
func blockExecs(t *testing.T, rt *fakeruntime.Runtime) (entered <-chan string, release func()) {
	in := make(chan string, 8)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	rt.SetHooks(fakeruntime.Hooks{Exec: func(id string, _ *agent.ExecRequest) error {
		in <- id
		<-gate
		return nil
	}})
	return in, release
}

// exec runs true in sandbox id in the background and returns where its
// result arrives.
func (d *testDaemon) exec(id string) <-chan error {
	res := make(chan error, 1)
	go func() {
		out, err := d.api.Sandbox.Execute(context.Background(), id, api.ExecRequest{Command: []string{"true"}, Timeout: 60})
		if err == nil && out.ExitCode != 0 {
			err = errors.New("exit code " + out.Stderr)
		}
		res <- err
	}()
	return res
}

// A shutdown stops accepting connections at once but lets a request in
// flight finish, and Serve returns only after it has.
func TestShutdownDrainsRequests(t *testing.T) {
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	d := start(t, testConfig(t.TempDir(), rt), nil)
	d.importTiny()
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef})
	entered, release := blockExecs(t, rt)
	res := d.exec(sb.ID)
	<-entered

	d.cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			break // no longer accepting
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 5s into the shutdown")
		}
	}
	select {
	case err := <-d.served:
		t.Fatalf("Serve returned (%v) with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-res; err != nil {
		t.Errorf("request in flight at shutdown: %v, want it answered", err)
	}
	select {
	case err := <-d.served:
		d.served <- err // for stop
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still running 10s after the last request ended")
	}
	if err := d.stop(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// A request still running at the shutdown timeout is ended: shutdown does
// not wait for it longer.
func TestShutdownTimeoutEndsRequests(t *testing.T) {
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	cfg := testConfig(t.TempDir(), rt)
	cfg.ShutdownTimeout = 300 * time.Millisecond
	d := start(t, cfg, nil)
	d.importTiny()
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef})
	entered, _ := blockExecs(t, rt)
	res := d.exec(sb.ID)
	<-entered
	began := time.Now()
	if err := d.stop(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if took := time.Since(began); took < cfg.ShutdownTimeout {
		t.Errorf("shutdown took %v, less than the %v it waits for requests", took, cfg.ShutdownTimeout)
	}
	if err := <-res; err == nil {
		t.Error("a request ended by the shutdown timeout was answered as a success")
	}
}

// Serve runs the background loops, restarts one that panics, and stops
// them all and waits for them before it returns.
func TestLoops(t *testing.T) {
	var stopped atomic.Bool
	var runs atomic.Int32
	again := make(chan struct{})
	d := start(t, testConfig(t.TempDir(), fakeruntime.New()), func(s *System) {
		s.Loops.Go("slow to stop", func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // its own clean-up
			stopped.Store(true)
			return nil
		})
		s.Loops.Go("flaky", func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				panic("flaky loop")
			}
			close(again)
			<-ctx.Done()
			return nil
		}, supervisor.Backoff(time.Millisecond, 10*time.Millisecond))
	})
	select {
	case <-again:
	case <-time.After(5 * time.Second):
		t.Fatal("a loop that panicked was not run again")
	}
	if got := d.sys.Loops.Running(); !slices.Contains(got, "sandbox sweep") || !slices.Contains(got, "flaky") {
		t.Errorf("loops running: %v, want the sandbox sweep and flaky among them", got)
	}
	if err := d.stop(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if !stopped.Load() {
		t.Error("Serve returned before a loop had stopped")
	}
	if got := d.sys.Loops.Running(); len(got) != 0 {
		t.Errorf("loops still running after Serve returned: %v", got)
	}
	if log := d.log.String(); !strings.Contains(log, "loop failed: restarting") || !strings.Contains(log, "panic: flaky loop") {
		t.Errorf("the panic was not logged:\n%s", log)
	}
}

// A critical loop's failure shuts the daemon down, and Serve returns it.
func TestCriticalLoopStopsDaemon(t *testing.T) {
	boom := errors.New("archive lost")
	fail := make(chan struct{})
	d := start(t, testConfig(t.TempDir(), fakeruntime.New()), func(s *System) {
		s.Loops.Go("flusher", func(ctx context.Context) error {
			select {
			case <-fail:
				return boom
			case <-ctx.Done():
				return nil
			}
		}, supervisor.Critical())
	})
	close(fail)
	select {
	case err := <-d.served:
		if !errors.Is(err, boom) {
			t.Errorf("Serve: %v, want the flusher's failure", err)
		}
		d.served <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still running 10s after a critical loop failed")
	}
	if _, err := net.Dial("tcp", d.addr); err == nil {
		t.Error("still accepting connections after Serve returned")
	}
}
