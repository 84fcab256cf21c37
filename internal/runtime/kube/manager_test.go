package kube_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// TestManager runs the daemon's sandbox lifecycle over the runtime, as
// serve --runtime kubernetes does: create from an image, exec, a daemon
// restart that re-adopts the sandbox, stop (start refused: no files kept),
// delete.
func TestManager(t *testing.T) {
	k := startTierA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	newManager := func() *manager.Manager {
		m := manager.New(manager.Config{StartTimeout: time.Minute}, k.runtime(t, kube.ConnectDirect), st, slog.New(slog.DiscardHandler))
		t.Cleanup(m.Close)
		if err := m.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := newManager()
	sb, err := m.Create(ctx, manager.CreateRequest{Image: testImage, Env: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != string(api.StatusRunning) {
		t.Fatalf("created sandbox is %s (%s)", sb.Status, sb.Reason)
	}
	exec := func(m *manager.Manager, script string) string {
		t.Helper()
		res, err := m.Exec(ctx, sb.ID, manager.ExecRequest{Command: []string{"sh", "-c", script}})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("exec %q exited %d: %s", script, res.ExitCode, res.Stderr)
		}
		return res.Stdout
	}
	if got, want := exec(m, `echo "$GREETING from $(pwd) as $(id -u), home $HOME"`), "hello from /workspace as 1000, home /home/sandbox\n"; got != want {
		t.Errorf("exec: %q, want %q", got, want)
	}
	// A restart: a new runtime and manager on the same cluster and store.
	m2 := newManager()
	if got := exec(m2, "echo adopted"); got != "adopted\n" {
		t.Errorf("exec after a restart: %q", got)
	}
	if sb, err = m2.Stop(ctx, sb.ID); err != nil || sb.Status != string(api.StatusSucceeded) {
		t.Fatalf("Stop: %+v, %v", sb, err)
	}
	// Pods keep no files across a stop: the manager says so.
	if _, err = m2.Start(ctx, sb.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Start after Stop: %v, want refused as a failed precondition", err)
	}
	if err := m2.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	pods, err := k.c.Client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelOwner + "=" + k.owner})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods left after Delete: %v, %v", pods, err)
	}
}
