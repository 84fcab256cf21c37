package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
)

// TestRunRetention: a daemon with a run max age removes, from its start,
// the runs that ended longer ago (record and files) and the files of runs
// that have no record; a run that ended since stays, and its files.
func TestRunRetention(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.RunMaxAge = time.Hour
	dir := filepath.Join(cfg.DataDir, "runs")
	now := time.Now().UTC()
	d := start(t, cfg, func(s *System) {
		for id, ended := range map[string]time.Time{"run-old": now.Add(-2 * time.Hour), "run-new": now.Add(-time.Minute)} {
			if err := s.Store.CreateRun(ctx, &store.Run{ID: id, BatchID: "b", Task: "t", Agent: "custom", Status: "succeeded",
				CreatedAt: ended, UpdatedAt: ended, EndedAt: &ended}); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"run-old", "run-new", "run-orphan"} {
			if err := os.MkdirAll(filepath.Join(dir, id, "artifacts"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := d.api.Runs().Get(ctx, "run-old")
		_, statOld := os.Stat(filepath.Join(dir, "run-old"))
		_, statOrphan := os.Stat(filepath.Join(dir, "run-orphan"))
		if errors.Is(err, client.ErrNotFound) && os.IsNotExist(statOld) && os.IsNotExist(statOrphan) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: get run-old: %v; its files: %v; the orphan's: %v", err, statOld, statOrphan)
		}
	}
	if _, err := d.api.Runs().Get(ctx, "run-new"); err != nil {
		t.Errorf("the run that ended a minute ago: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-new")); err != nil {
		t.Errorf("its files: %v", err)
	}
}
