package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// pageTests are Run's cases for paged lists, counts and the bounded
// create.
var pageTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"SandboxPage", testSandboxPage},
	{"SandboxPageStable", testSandboxPageStable},
	{"SandboxPageBadCursor", testSandboxPageBadCursor},
	{"CountSandboxesByStatus", testCountSandboxes},
	{"ListSandboxLimits", testListSandboxLimits},
	{"CreateSandboxLimited", testCreateLimited},
	{"CreateSandboxLimitedConcurrent", testCreateLimitedConcurrent},
	{"ContextPage", testContextPage},
	{"CountContexts", testCountContexts},
	{"SnapshotPage", testSnapshotPage},
	{"SessionPage", testSessionPage},
}

// createSandboxes stores sandboxes ids in order, one second apart, and
// the ones pooled in a warm pool.
func createSandboxes(t *testing.T, s store.Store, base time.Time, ids []string, pooled map[string]bool) {
	t.Helper()
	for i, id := range ids {
		sb := sample(id)
		sb.CreatedAt = base.Add(time.Duration(i) * time.Second).UTC().Truncate(time.Microsecond)
		if pooled[id] {
			sb.Pool = "python"
		}
		if err := s.CreateSandbox(context.Background(), sb); err != nil {
			t.Fatalf("create sandbox %s: %v", id, err)
		}
	}
}

// pages lists every page from p (its limit and order), following the
// cursors; it fails the test past 100 pages.
func pages[T any](t *testing.T, p store.Page, list func(store.Page) ([]*T, string, error), id func(*T) string) [][]string {
	t.Helper()
	out := [][]string{}
	for range 100 {
		items, next, err := list(p)
		if err != nil {
			t.Fatalf("list page %+v: %v", p, err)
		}
		ids := []string{}
		for _, it := range items {
			ids = append(ids, id(it))
		}
		out = append(out, ids)
		if next == "" {
			return out
		}
		p.After = next
	}
	t.Fatal("more than 100 pages")
	return nil
}

func sandboxID(sb *store.Sandbox) string { return sb.ID }

func testSandboxPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	empty, next, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{Limit: 2})
	if err != nil || len(empty) != 0 || next != "" {
		t.Fatalf("empty page = %v, %q, %v; want none and no cursor", empty, next, err)
	}
	base := time.Now()
	// Two sandboxes share a creation time: the id orders them.
	createSandboxes(t, s, base, []string{"p0", "p1", "p2", "p3", "p4"}, map[string]bool{"p1": true, "p3": true})
	tie := sample("p2b")
	tie.CreatedAt = base.Add(2 * time.Second).UTC().Truncate(time.Microsecond)
	if err := s.CreateSandbox(ctx, tie); err != nil {
		t.Fatal(err)
	}
	newest := func(limit int) store.Page { return store.Page{Limit: limit, Desc: true} }
	tests := []struct {
		name string
		f    store.SandboxFilter
		p    store.Page
		want [][]string
	}{
		{"all in one", store.SandboxFilter{}, store.Page{}, [][]string{{"p0", "p1", "p2", "p2b", "p3", "p4"}}},
		{"pages of 2", store.SandboxFilter{}, store.Page{Limit: 2}, [][]string{{"p0", "p1"}, {"p2", "p2b"}, {"p3", "p4"}}},
		{"pages of 4", store.SandboxFilter{}, store.Page{Limit: 4}, [][]string{{"p0", "p1", "p2", "p2b"}, {"p3", "p4"}}},
		{"one page exactly", store.SandboxFilter{}, store.Page{Limit: 6}, [][]string{{"p0", "p1", "p2", "p2b", "p3", "p4"}}},
		{"larger than all", store.SandboxFilter{}, store.Page{Limit: 100}, [][]string{{"p0", "p1", "p2", "p2b", "p3", "p4"}}},
		{"pools apart", store.SandboxFilter{ExcludePooled: true}, store.Page{}, [][]string{{"p0", "p2", "p2b", "p4"}}},
		{"pools apart, pages of 3", store.SandboxFilter{ExcludePooled: true}, store.Page{Limit: 3}, [][]string{{"p0", "p2", "p2b"}, {"p4"}}},
		{"pools apart, pages of 1", store.SandboxFilter{ExcludePooled: true}, store.Page{Limit: 1}, [][]string{{"p0"}, {"p2"}, {"p2b"}, {"p4"}}},
		// Newest first: the tie the other way round too.
		{"newest first, all in one", store.SandboxFilter{}, newest(0), [][]string{{"p4", "p3", "p2b", "p2", "p1", "p0"}}},
		{"newest first, pages of 2", store.SandboxFilter{}, newest(2), [][]string{{"p4", "p3"}, {"p2b", "p2"}, {"p1", "p0"}}},
		{"newest first, pages of 4", store.SandboxFilter{}, newest(4), [][]string{{"p4", "p3", "p2b", "p2"}, {"p1", "p0"}}},
		{"newest first, one page exactly", store.SandboxFilter{}, newest(6), [][]string{{"p4", "p3", "p2b", "p2", "p1", "p0"}}},
		{"newest first, pools apart, pages of 3", store.SandboxFilter{ExcludePooled: true}, newest(3), [][]string{{"p4", "p2b", "p2"}, {"p0"}}},
		{"newest first, pool, pages of 1", store.SandboxFilter{Pool: "python"}, newest(1), [][]string{{"p3"}, {"p1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pages(t, tt.p, func(p store.Page) ([]*store.Sandbox, string, error) {
				return s.ListSandboxPage(ctx, tt.f, p)
			}, sandboxID)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	// Paged records are whole, and agree with ListSandboxes.
	all, err := s.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, _, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, page); diff != "" {
		t.Errorf("whole page differs from ListSandboxes (-list +page):\n%s", diff)
	}
}

// A cursor marks a place: removing or adding sandboxes before it neither
// repeats nor skips the ones after it, oldest first or newest first; and
// the place is the same in either order.
func testSandboxPageStable(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now()
	at := func(d time.Duration) time.Time { return base.Add(d).UTC().Truncate(time.Microsecond) }
	tests := []struct {
		name     string
		desc     bool
		gone     []string // deleted after the first page: the last is the cursor's own
		added    string   // created after the first page, before the cursor
		addedAt  time.Time
		wantRest []string
	}{
		{"oldest first", false, []string{"s0", "s1"}, "early", at(-time.Hour), []string{"s2", "s3", "s4"}},
		{"newest first", true, []string{"s4", "s3"}, "late", at(time.Hour), []string{"s2", "s1", "s0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() { clearSandboxes(t, s) })
			createSandboxes(t, s, base, []string{"s0", "s1", "s2", "s3", "s4"}, nil)
			first, next, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{Limit: 2, Desc: tt.desc})
			if err != nil || len(first) != 2 || next == "" {
				t.Fatalf("first page = %v, %q, %v", first, next, err)
			}
			for _, id := range tt.gone {
				if err := s.DeleteSandbox(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			added := sample(tt.added)
			added.CreatedAt = tt.addedAt
			if err := s.CreateSandbox(ctx, added); err != nil {
				t.Fatal(err)
			}
			rest, next, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{After: next, Limit: 10, Desc: tt.desc})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantRest, idsOf(rest, sandboxID)); diff != "" || next != "" {
				t.Errorf("page after the cursor (-want +got):\n%s\nnext %q, want none", diff, next)
			}
		})
	}
	// The cursor after s1 oldest first is the place before s2 newest
	// first: the other way from it are s0 alone.
	createSandboxes(t, s, base, []string{"s0", "s1", "s2", "s3"}, nil)
	_, next, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	back, more, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{After: next, Limit: 2, Desc: true})
	if diff := cmp.Diff([]string{"s0"}, idsOf(back, sandboxID)); diff != "" || more != "" || err != nil {
		t.Errorf("newest first from an oldest-first cursor (-want +got):\n%s\nnext %q, %v; want no next", diff, more, err)
	}
}

// clearSandboxes deletes every sandbox.
func clearSandboxes(t *testing.T, s store.Store) {
	t.Helper()
	all, err := s.ListSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if err := s.DeleteSandbox(context.Background(), sb.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// idsOf returns the ids of items, in order; never nil.
func idsOf[T any](items []*T, id func(*T) string) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, id(it))
	}
	return out
}

func testSandboxPageBadCursor(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, c := range []string{"garbage", "!!!", store.Cursor(time.Now(), "")[:3]} {
		if _, _, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{After: c}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("sandbox page after %q: %v, want invalid argument", c, err)
		}
		if _, _, err := s.ListContextPage(ctx, store.ContextFilter{}, store.Page{After: c}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("context page after %q: %v, want invalid argument", c, err)
		}
	}
}

// ListSandboxLimits has every sandbox, warm pools' and every status
// included, each with its own status and limits as stored and updated.
func testListSandboxLimits(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.ListSandboxLimits(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v; want none", got, err)
	}
	var want []store.SandboxLimits
	for i, c := range []struct{ status, pool, cpu, memory string }{
		{"running", "", "1", "1Gi"}, {"pending", "", "500m", "512Mi"}, {"failed", "", "2", "2Gi"},
		{"paused", "", "250m", "256Mi"}, {"running", "python", "1", "1Gi"},
	} {
		sb := sample(fmt.Sprintf("l%d", i))
		sb.Status, sb.Pool, sb.CPU, sb.Memory = c.status, c.pool, c.cpu, c.memory
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		want = append(want, store.SandboxLimits{ID: sb.ID, Status: c.status, CPU: c.cpu, Memory: c.memory})
	}
	if _, err := s.UpdateSandbox(ctx, "l1", func(sb *store.Sandbox) error { sb.Status = "running"; return nil }); err != nil {
		t.Fatal(err)
	}
	want[1].Status = "running"
	if err := s.DeleteSandbox(ctx, "l2"); err != nil {
		t.Fatal(err)
	}
	want = slices.Delete(want, 2, 3)
	got, err = s.ListSandboxLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := func(a, b store.SandboxLimits) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(got, byID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
}

func testCountSandboxes(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.CountSandboxesByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.SandboxCounts{ByStatus: map[string]int{}}, got); diff != "" {
		t.Errorf("empty counts (-want +got):\n%s", diff)
	}
	for i, c := range []struct{ status, pool string }{
		{"running", ""}, {"running", ""}, {"failed", ""}, {"pending", ""},
		{"running", "python"}, {"pending", "node"}, {"terminating", ""},
	} {
		sb := sample(fmt.Sprintf("c%d", i))
		sb.Status, sb.Pool = c.status, c.pool
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	got, err = s.CountSandboxesByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := store.SandboxCounts{ByStatus: map[string]int{"running": 2, "failed": 1, "pending": 1, "terminating": 1}, Pooled: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	// Claiming a pooled sandbox moves it into the counts by status.
	if _, err := s.UpdateSandbox(ctx, "c4", func(sb *store.Sandbox) error { sb.Pool = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.CountSandboxesByStatus(ctx)
	want = store.SandboxCounts{ByStatus: map[string]int{"running": 3, "pending": 1, "terminating": 1}, Pooled: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counts after claim and delete (-want +got):\n%s", diff)
	}
}

func testCreateLimited(t *testing.T, s store.Store) {
	ctx := context.Background()
	pooled := sample("pooled") // warm pools count against the limit
	pooled.Pool = "python"
	for _, sb := range []*store.Sandbox{sample("a"), pooled} {
		if err := s.CreateSandboxLimited(ctx, sb, 2); err != nil {
			t.Fatalf("create %s under the limit: %v", sb.ID, err)
		}
	}
	err := s.CreateSandboxLimited(ctx, sample("c"), 2)
	var le *store.LimitError
	if !errors.As(err, &le) || !errors.Is(err, errdefs.ErrResourceExhausted) || *le != (store.LimitError{Count: 2, Limit: 2}) {
		t.Fatalf("create at the limit: %v, want a LimitError{2, 2} matching ErrResourceExhausted", err)
	}
	if _, err := s.GetSandbox(ctx, "c"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("sandbox refused by the limit was stored: %v", err)
	}
	if err := s.CreateSandboxLimited(ctx, sample("a"), 10); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate under the limit: %v, want already exists", err)
	}
	if err := s.DeleteSandbox(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandboxLimited(ctx, sample("c"), 2); err != nil {
		t.Errorf("create after a delete freed a slot: %v", err)
	}
	for i, limit := range []int{0, -1} {
		if err := s.CreateSandboxLimited(ctx, sample(fmt.Sprintf("free%d", i)), limit); err != nil {
			t.Errorf("create with limit %d (none): %v", limit, err)
		}
	}
}

func testCreateLimitedConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n, limit = 30, 5
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.CreateSandboxLimited(ctx, sample(fmt.Sprintf("x%d", i)), limit)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errdefs.ErrResourceExhausted):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	all, err := s.ListSandboxes(ctx)
	if ok.Load() != limit || refused.Load() != n-limit || err != nil || len(all) != limit {
		t.Errorf("%d concurrent creates with limit %d: %d created, %d refused, %d stored (%v); want %d, %d, %d",
			n, limit, ok.Load(), refused.Load(), len(all), err, limit, n-limit, limit)
	}
}

func contextID(c *store.Context) string { return c.ID }

func testContextPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb-a")
	mustCreateSandbox(t, s, "sb-b")
	base := time.Now()
	for i, c := range []struct{ id, sb, session string }{
		{"k0", "sb-a", "s1"}, {"k1", "sb-b", "s1"}, {"k2", "sb-a", "s2"}, {"k3", "sb-a", "s1"}, {"k4", "sb-b", ""},
	} {
		cc := sampleContext(c.id, c.sb, base.Add(time.Duration(i)*time.Second))
		cc.SessionName = c.session
		mustCreateContext(t, s, cc)
	}
	tests := []struct {
		name string
		f    store.ContextFilter
		p    store.Page
		want [][]string
	}{
		{"all", store.ContextFilter{}, store.Page{}, [][]string{{"k0", "k1", "k2", "k3", "k4"}}},
		{"pages of 2", store.ContextFilter{}, store.Page{Limit: 2}, [][]string{{"k0", "k1"}, {"k2", "k3"}, {"k4"}}},
		{"session, pages of 2", store.ContextFilter{SessionName: "s1"}, store.Page{Limit: 2}, [][]string{{"k0", "k1"}, {"k3"}}},
		{"sandbox, pages of 1", store.ContextFilter{SandboxID: "sb-b"}, store.Page{Limit: 1}, [][]string{{"k1"}, {"k4"}}},
		{"none", store.ContextFilter{SessionName: "nope"}, store.Page{Limit: 2}, [][]string{{}}},
		{"newest first, pages of 2", store.ContextFilter{}, store.Page{Limit: 2, Desc: true}, [][]string{{"k4", "k3"}, {"k2", "k1"}, {"k0"}}},
		{"newest first, session", store.ContextFilter{SessionName: "s1"}, store.Page{Limit: 2, Desc: true}, [][]string{{"k3", "k1"}, {"k0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pages(t, tt.p, func(p store.Page) ([]*store.Context, string, error) {
				return s.ListContextPage(ctx, tt.f, p)
			}, contextID)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
}

func testCountContexts(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb-a")
	mustCreateSandbox(t, s, "sb-b")
	for i, c := range []struct{ id, sb, session string }{
		{"k0", "sb-a", "s1"}, {"k1", "sb-b", "s1"}, {"k2", "sb-a", "s2"},
	} {
		cc := sampleContext(c.id, c.sb, time.Now().Add(time.Duration(i)*time.Second))
		cc.SessionName = c.session
		mustCreateContext(t, s, cc)
	}
	tests := []struct {
		f    store.ContextFilter
		want int
	}{
		{store.ContextFilter{}, 3},
		{store.ContextFilter{SessionName: "s1"}, 2},
		{store.ContextFilter{SandboxID: "sb-a"}, 2},
		{store.ContextFilter{SessionName: "s1", SandboxID: "sb-a"}, 1},
		{store.ContextFilter{SessionName: "nope"}, 0},
	}
	for _, tt := range tests {
		if got, err := s.CountContexts(ctx, tt.f); err != nil || got != tt.want {
			t.Errorf("count %+v = %d, %v; want %d", tt.f, got, err, tt.want)
		}
	}
}

func testSnapshotPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now()
	for i, sn := range []struct{ id, sb, tenant string }{
		{"n0", "sbx-1", "t1"}, {"n1", "sbx-2", "t1"}, {"n2", "sbx-1", "t2"}, {"n3", "sbx-1", "t1"}, {"n4", "sbx-2", ""},
	} {
		if err := s.CreateSnapshot(ctx, sampleSnapshot(sn.id, sn.sb, sn.tenant, base.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatalf("create snapshot %s: %v", sn.id, err)
		}
	}
	// Two created in the same microsecond come in id order.
	if err := s.CreateSnapshot(ctx, sampleSnapshot("n3b", "sbx-1", "t1", base.Add(3*time.Second))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    store.SnapshotFilter
		p    store.Page
		want [][]string
	}{
		{"all", store.SnapshotFilter{}, store.Page{}, [][]string{{"n0", "n1", "n2", "n3", "n3b", "n4"}}},
		{"pages of 2", store.SnapshotFilter{}, store.Page{Limit: 2}, [][]string{{"n0", "n1"}, {"n2", "n3"}, {"n3b", "n4"}}},
		{"sandbox, pages of 2", store.SnapshotFilter{SandboxID: "sbx-1"}, store.Page{Limit: 2}, [][]string{{"n0", "n2"}, {"n3", "n3b"}}},
		{"tenant, pages of 1", store.SnapshotFilter{Tenant: "t1"}, store.Page{Limit: 1}, [][]string{{"n0"}, {"n1"}, {"n3"}, {"n3b"}}},
		{"none", store.SnapshotFilter{SandboxID: "nope"}, store.Page{Limit: 2}, [][]string{{}}},
		{"newest first, pages of 4", store.SnapshotFilter{}, store.Page{Limit: 4, Desc: true}, [][]string{{"n4", "n3b", "n3", "n2"}, {"n1", "n0"}}},
		{"newest first, sandbox and tenant", store.SnapshotFilter{SandboxID: "sbx-1", Tenant: "t1"}, store.Page{Limit: 1, Desc: true}, [][]string{{"n3b"}, {"n3"}, {"n0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pages(t, tt.p, func(p store.Page) ([]*store.Snapshot, string, error) {
				return s.ListSnapshotPage(ctx, tt.f, p)
			}, func(sn *store.Snapshot) string { return sn.ID })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, err := s.ListSnapshotPage(ctx, store.SnapshotFilter{}, store.Page{After: "nope"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a cursor the store did not give: %v, want invalid argument", err)
	}
}

func testSessionPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	base := time.Now()
	for i, c := range []struct{ tenant, id string }{
		{"a", "s0"}, {"", "s1"}, {"a", "s2"}, {"b", "s3"}, {"a", "s4"},
	} {
		mustCreateSession(t, s, sampleSession(c.tenant, c.id, "sb", base.Add(time.Duration(i)*time.Second)))
	}
	// Two made in the same microsecond come in key order.
	mustCreateSession(t, s, sampleSession("a", "s2b", "sb", base.Add(2*time.Second)))
	tests := []struct {
		name string
		f    store.SessionFilter
		p    store.Page
		want [][]string
	}{
		{"all", store.SessionFilter{AllTenants: true}, store.Page{}, [][]string{{"s0", "s1", "s2", "s2b", "s3", "s4"}}},
		{"all, pages of 4", store.SessionFilter{AllTenants: true}, store.Page{Limit: 4}, [][]string{{"s0", "s1", "s2", "s2b"}, {"s3", "s4"}}},
		{"tenant, pages of 2", store.SessionFilter{Tenant: "a"}, store.Page{Limit: 2}, [][]string{{"s0", "s2"}, {"s2b", "s4"}}},
		{"tenant, newest first, pages of 1", store.SessionFilter{Tenant: "a"}, store.Page{Limit: 1, Desc: true}, [][]string{{"s4"}, {"s2b"}, {"s2"}, {"s0"}}},
		{"no tenant's", store.SessionFilter{Tenant: "c"}, store.Page{Limit: 2}, [][]string{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pages(t, tt.p, func(p store.Page) ([]*store.Session, string, error) {
				return s.ListSessionPage(ctx, tt.f, p)
			}, func(ss *store.Session) string { return ss.ID })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, err := s.ListSessionPage(ctx, store.SessionFilter{}, store.Page{After: "nope"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a cursor the store did not give: %v, want invalid argument", err)
	}
}
