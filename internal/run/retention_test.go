package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// newStore returns an empty store of its own.
func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(bg, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newRetainer returns a service over st whose loop does not run: the
// tests call its removals themselves.
func newRetainer(t *testing.T, st store.Runs, maxAge time.Duration, opts ...Option) *Service {
	t.Helper()
	svc, err := New(Config{Dir: filepath.Join(t.TempDir(), "runs"), MaxAge: maxAge}, nil, st, slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// record stores run id, of tenant, with status, which ended at ended
// (active runs: last updated then), and gives it files in each of dirs'
// services.
func record(t *testing.T, st store.Runs, id, tenant string, status api.RunStatus, ended time.Time, files ...*Service) {
	t.Helper()
	r := &store.Run{ID: id, BatchID: "b", Task: "t", Agent: "custom", Status: string(status), Tenant: tenant,
		CreatedAt: ended.Add(-time.Minute), UpdatedAt: ended}
	if status.Final() {
		r.EndedAt = &ended
	}
	if err := st.CreateRun(bg, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range files {
		writeRunFiles(t, s, id)
	}
}

func writeRunFiles(t *testing.T, s *Service, id string) {
	t.Helper()
	dir := filepath.Join(s.runDir(id), artifactsDir, "workspace")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(s.runDir(id), eventsFile), filepath.Join(dir, "out.txt")} {
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// kept returns the ids of the runs st has, and of those s has files of.
func kept(t *testing.T, st store.Runs, s *Service) (records, files []string) {
	t.Helper()
	recs, _, err := st.ListRunPage(bg, store.RunFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	records = []string{}
	for _, r := range recs {
		records = append(records, r.ID)
	}
	slices.Sort(records)
	files = []string{}
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		files = append(files, e.Name())
	}
	return records, files
}

// Expire removes the runs that ended more than MaxAge ago by the
// service's clock, every tenant's, records and files; never an active
// run, nor one that ended since; and nothing without a MaxAge.
func TestExpire(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const day = 24 * time.Hour
	tests := []struct {
		name    string
		maxAge  time.Duration
		advance time.Duration // the clock, after the first Expire
		// want are the runs kept after the first Expire, then after the
		// second.
		want, later []string
	}{
		{"a day", day, 0,
			[]string{"run-active", "run-recent", "run-then"}, []string{"run-active", "run-recent", "run-then"}},
		{"a day, then the clock moves by an hour", day, time.Hour,
			[]string{"run-active", "run-recent", "run-then"}, []string{"run-active", "run-recent"}},
		{"a day, then the clock moves by a day", day, day,
			[]string{"run-active", "run-recent", "run-then"}, []string{"run-active"}},
		{"no max age", 0, 100 * day,
			[]string{"run-active", "run-old", "run-recent", "run-theirs", "run-then"},
			[]string{"run-active", "run-old", "run-recent", "run-theirs", "run-then"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			clock := now // the service's time, read only by the Expire calls below
			s := newRetainer(t, st, tt.maxAge, WithClock(func() time.Time { return clock }))
			record(t, st, "run-old", "key-a", api.RunSucceeded, now.Add(-2*day), s)
			record(t, st, "run-theirs", "key-b", api.RunCancelled, now.Add(-30*day), s)
			record(t, st, "run-then", "key-a", api.RunFailed, now.Add(-day), s) // exactly MaxAge ago: kept
			record(t, st, "run-recent", "key-a", api.RunHung, now.Add(-time.Hour), s)
			record(t, st, "run-active", "key-a", api.RunRunning, now.Add(-40*day), s)
			for i, want := range [][]string{tt.want, tt.later} {
				if i == 1 {
					clock = clock.Add(tt.advance)
				}
				wantN := 5 - len(want)
				if i == 1 {
					wantN = len(tt.want) - len(want)
				}
				n, err := s.Expire(bg)
				if err != nil || n != wantN {
					t.Errorf("expire %d: %d removed, %v; want %d", i+1, n, err, wantN)
				}
				records, files := kept(t, st, s)
				if diff := cmp.Diff(want, records); diff != "" {
					t.Errorf("records after expire %d (-want +got):\n%s", i+1, diff)
				}
				if diff := cmp.Diff(want, files); diff != "" {
					t.Errorf("files after expire %d (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}

// Expire reads the expired runs page by page, deleting as it goes, and
// two daemons expiring at once (a leadership changing hands) remove each
// run once between them, with no error.
func TestExpirePagesAndConcurrent(t *testing.T) {
	st := newStore(t)
	now := time.Now().UTC()
	const n = 3*retentionPage + 7
	a := newRetainer(t, st, time.Hour)
	b := newRetainer(t, st, time.Hour)
	for i := range n {
		record(t, st, fmt.Sprintf("run-%04d", i), "", api.RunSucceeded, now.Add(-2*time.Hour+time.Duration(i)*time.Millisecond))
	}
	record(t, st, "run-new", "", api.RunSucceeded, now)
	var removed atomic.Int64
	var wg sync.WaitGroup
	for _, s := range []*Service{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.Expire(bg)
			if err != nil {
				t.Error(err)
			}
			removed.Add(int64(got))
		}()
	}
	wg.Wait()
	if removed.Load() != n {
		t.Errorf("%d runs removed between the two, want %d", removed.Load(), n)
	}
	if records, _ := kept(t, st, a); !cmp.Equal(records, []string{"run-new"}) {
		t.Errorf("records left: %v, want run-new", records)
	}
}

// Runs whose records were removed elsewhere leave their files on every
// daemon that wrote some: each daemon's RemoveOrphans removes its own,
// and only those.
func TestRemoveOrphans(t *testing.T) {
	st := newStore(t)
	now := time.Now().UTC()
	// a carried out both runs; b ended run-gone after a died, writing
	// files of its own.
	a, b := newRetainer(t, st, 0), newRetainer(t, st, 0)
	record(t, st, "run-gone", "", api.RunFailed, now, a, b)
	record(t, st, "run-kept", "", api.RunSucceeded, now, a)
	for _, p := range []string{"batches/b-1", "notarun"} {
		os.MkdirAll(filepath.Join(a.cfg.Dir, p), 0o700)
	}
	if err := b.Delete(bg, "run-gone"); err != nil {
		t.Fatal(err)
	}
	if _, files := kept(t, st, b); len(files) != 0 {
		t.Errorf("b's files after its delete: %v, want none", files)
	}
	if _, files := kept(t, st, a); !cmp.Equal(files, []string{"batches", "notarun", "run-gone", "run-kept"}) {
		t.Errorf("a's files before its sweep: %v", files)
	}
	if n, err := a.RemoveOrphans(bg); err != nil || n != 1 {
		t.Errorf("a's sweep: %d removed, %v; want 1", n, err)
	}
	if _, files := kept(t, st, a); !cmp.Equal(files, []string{"batches", "notarun", "run-kept"}) {
		t.Errorf("a's files after its sweep: %v", files)
	}
	if n, err := a.RemoveOrphans(bg); err != nil || n != 0 {
		t.Errorf("a's second sweep: %d removed, %v; want none", n, err)
	}
	// A store out of reach removes nothing.
	down := newRetainer(t, failing{Runs: st, get: errdefs.Unavailable("store down")}, 0)
	writeRunFiles(t, down, "run-kept")
	if n, err := down.RemoveOrphans(bg); !errors.Is(err, errdefs.ErrUnavailable) || n != 0 {
		t.Errorf("sweep with the store down: %d removed, %v; want none, ErrUnavailable", n, err)
	}
	if _, err := os.Stat(down.runDir("run-kept")); err != nil {
		t.Errorf("files after a sweep with the store down: %v", err)
	}
}

// failing is a store whose GetRun or DeleteRun fail with get or del.
type failing struct {
	store.Runs
	get, del error
}

func (f failing) GetRun(ctx context.Context, id string) (*store.Run, error) {
	if f.get != nil {
		return nil, f.get
	}
	return f.Runs.GetRun(ctx, id)
}

func (f failing) DeleteRun(ctx context.Context, id string) error {
	if f.del != nil {
		return f.del
	}
	return f.Runs.DeleteRun(ctx, id)
}

// A delete that fails changes nothing: not the record, not the files;
// one refused (active, another tenant's, unknown) neither.
func TestDeleteFails(t *testing.T) {
	st := newStore(t)
	now := time.Now().UTC()
	s := newRetainer(t, failing{Runs: st, del: errdefs.Unavailable("store down")}, 0)
	record(t, st, "run-ended", "key-a", api.RunSucceeded, now, s)
	record(t, st, "run-active", "key-a", api.RunRunning, now, s)
	a, b := auth.WithTenant(bg, "key-a"), auth.WithTenant(bg, "key-b")
	tests := []struct {
		name string
		ctx  context.Context
		id   string
		want error
	}{
		{"the store fails", a, "run-ended", errdefs.ErrUnavailable},
		{"active", a, "run-active", errdefs.ErrFailedPrecondition},
		{"another tenant's", b, "run-ended", errdefs.ErrNotFound},
		{"no tenant", bg, "run-ended", errdefs.ErrNotFound},
		{"unknown", a, "run-none", errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Delete(tt.ctx, tt.id); !errors.Is(err, tt.want) {
				t.Errorf("delete: %v, want %v", err, tt.want)
			}
			records, files := kept(t, st, s)
			want := []string{"run-active", "run-ended"}
			if !cmp.Equal(records, want) || !cmp.Equal(files, want) {
				t.Errorf("after the delete: records %v, files %v; want both %v", records, files, want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(s.runDir("run-ended"), eventsFile)); err != nil {
		t.Errorf("the run's event log: %v", err)
	}
}

// RunRetention sweeps at once and then every interval, and returns nil
// when its context ends.
func TestRunRetention(t *testing.T) {
	s := newRetainer(t, newStore(t), 0)
	ctx, cancel := context.WithCancel(bg)
	swept := make(chan struct{})
	var calls int
	done := make(chan error)
	go func() {
		done <- s.RunRetention(ctx, time.Millisecond, func(context.Context) (int, error) {
			calls++
			if calls == 3 {
				close(swept)
			}
			return 1, errors.New("logged, not returned")
		})
	}()
	<-swept
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunRetention: %v, want nil", err)
	}
}
