package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// sessionTests are Run's cases for store.Sessions.
var sessionTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"SessionCreateGet", testSessionCreateGet},
	{"SessionNoSandbox", testSessionNoSandbox},
	{"SessionDuplicate", testSessionDuplicate},
	{"SessionNotFound", testSessionNotFound},
	{"SessionList", testSessionList},
	{"SessionUpdate", testSessionUpdate},
	{"SessionConcurrentUpdates", testSessionConcurrentUpdates},
	{"SessionDeletedWithSandbox", testSessionDeletedWithSandbox},
	{"ReapableSandboxes", testReapableSandboxes},
}

// sampleSession returns tenant's session id in sandbox sbID using every
// field.
func sampleSession(tenant, id, sbID string, created time.Time) *store.Session {
	created = created.UTC().Truncate(time.Microsecond)
	ends := created.Add(24 * time.Hour)
	return &store.Session{
		Key: store.SessionKey(tenant, id), ID: id, Tenant: tenant, SandboxID: sbID, OwnsSandbox: true,
		Flavor: "medium", CPU: "2", Memory: "2Gi", Template: "tpl", Image: "agent2env/code-interpreter",
		IdleTimeout: 30 * time.Minute, CreatedAt: created, LastUsedAt: created.Add(time.Second),
		ExpiresAt: created.Add(time.Second + 30*time.Minute), EndsAt: &ends,
		ExecutionCount: 3, ErrorCount: 1, ExecutionTime: 1500 * time.Millisecond,
	}
}

func mustCreateSession(t *testing.T, s store.Store, sess *store.Session) {
	t.Helper()
	if err := s.CreateSession(context.Background(), sess); err != nil {
		t.Fatalf("create session %s: %v", sess.Key, err)
	}
}

func testSessionCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	want := sampleSession("tenant", "s1 ✓", "sb", time.Now())
	mustCreateSession(t, s, want)
	got, err := s.GetSession(ctx, store.SessionKey("tenant", "s1 ✓"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	// Zero values round-trip too.
	bare := &store.Session{Key: "/bare", ID: "bare", SandboxID: "sb", CreatedAt: now(), LastUsedAt: now(), ExpiresAt: now()}
	mustCreateSession(t, s, bare)
	got, err = s.GetSession(ctx, "/bare")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bare, got); diff != "" {
		t.Errorf("get bare (-want +got):\n%s", diff)
	}
	if n, err := s.CountSessions(ctx); err != nil || n != 2 {
		t.Errorf("count = %d, %v; want 2", n, err)
	}
}

func testSessionNoSandbox(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSession(ctx, sampleSession("", "x", "nope", time.Now())); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("create in unknown sandbox: %v, want not found", err)
	}
	if _, err := s.GetSession(ctx, "/x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("session of a failed create: %v, want not found", err)
	}
}

// The same id of two tenants is two sessions; twice for one is a
// conflict that keeps the first.
func testSessionDuplicate(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	mustCreateSandbox(t, s, "sb2")
	mustCreateSession(t, s, sampleSession("a", "dup", "sb", time.Now()))
	mustCreateSession(t, s, sampleSession("b", "dup", "sb2", time.Now()))
	again := sampleSession("a", "dup", "sb2", time.Now())
	if err := s.CreateSession(ctx, again); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate create: %v, want already exists", err)
	}
	if got, err := s.GetSession(ctx, "a/dup"); err != nil || got.SandboxID != "sb" {
		t.Errorf("after failed duplicate = %+v, %v; want the first", got, err)
	}
}

func testSessionNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	called := false
	checks := map[string]error{}
	_, checks["get"] = s.GetSession(ctx, "/nope")
	_, checks["update"] = s.UpdateSession(ctx, "/nope", func(*store.Session) error {
		called = true
		return nil
	})
	checks["delete"] = s.DeleteSession(ctx, "/nope")
	for op, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s unknown key: %v, want not found", op, err)
		}
	}
	if called {
		t.Error("UpdateSession called fn for an unknown session")
	}
	mustCreateSandbox(t, s, "sb")
	mustCreateSession(t, s, sampleSession("", "gone", "sb", time.Now()))
	if err := s.DeleteSession(ctx, "/gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "/gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
	if _, err := s.GetSandbox(ctx, "sb"); err != nil {
		t.Errorf("the sandbox went with its session's record: %v", err)
	}
}

func testSessionList(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.ListSessions(ctx, store.SessionFilter{AllTenants: true})
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty list = %#v, %v; want []", got, err)
	}
	mustCreateSandbox(t, s, "sb")
	base := time.Now().UTC().Truncate(time.Microsecond)
	for _, c := range []struct {
		tenant, id string
		at         int
		expires    time.Duration // from base
		ends       time.Duration // from base; 0 for none
	}{
		{"a", "s3", 3, time.Hour, 0},
		{"", "s1", 1, -time.Minute, 0},
		{"a", "s2", 2, time.Hour, -time.Second},
		{"b", "s4", 4, 0, 0},
	} {
		sess := sampleSession(c.tenant, c.id, "sb", base.Add(time.Duration(c.at)*time.Second))
		sess.ExpiresAt, sess.EndsAt = base.Add(c.expires), nil
		if c.ends != 0 {
			ends := base.Add(c.ends)
			sess.EndsAt = &ends
		}
		mustCreateSession(t, s, sess)
	}
	tests := []struct {
		name string
		f    store.SessionFilter
		want []string
	}{
		{"no tenant", store.SessionFilter{}, []string{"/s1"}},
		{"tenant oldest first", store.SessionFilter{Tenant: "a"}, []string{"a/s2", "a/s3"}},
		{"unknown tenant", store.SessionFilter{Tenant: "z"}, []string{}},
		{"all", store.SessionFilter{AllTenants: true}, []string{"/s1", "a/s2", "a/s3", "b/s4"}},
		{"due: idle or past their lifetime", store.SessionFilter{AllTenants: true, DueBy: base}, []string{"/s1", "a/s2", "b/s4"}},
		{"due of a tenant", store.SessionFilter{Tenant: "a", DueBy: base}, []string{"a/s2"}},
		{"due earlier", store.SessionFilter{AllTenants: true, DueBy: base.Add(-30 * time.Second)}, []string{"/s1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListSessions(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			keys := []string{}
			for _, sess := range got {
				keys = append(keys, sess.Key)
			}
			if diff := cmp.Diff(tt.want, keys); diff != "" {
				t.Errorf("list %+v (-want +got):\n%s", tt.f, diff)
			}
		})
	}
}

func testSessionUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	orig := sampleSession("t", "u", "sb", time.Now())
	mustCreateSession(t, s, orig)
	used := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	updated, err := s.UpdateSession(ctx, "t/u", func(sess *store.Session) error {
		sess.ExecutionCount++
		sess.ExecutionTime += time.Second
		sess.LastUsedAt, sess.ExpiresAt, sess.EndsAt = used, used.Add(time.Hour), nil
		sess.Key = "t/renamed" // ignored: the key is the key
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := *orig
	want.ExecutionCount, want.ExecutionTime = 4, 2500*time.Millisecond
	want.LastUsedAt, want.ExpiresAt, want.EndsAt = used, used.Add(time.Hour), nil
	if diff := cmp.Diff(&want, updated); diff != "" {
		t.Errorf("returned (-want +got):\n%s", diff)
	}
	got, err := s.GetSession(ctx, "t/u")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateSession(ctx, "t/u", func(sess *store.Session) error {
		sess.ExecutionCount = 99
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("aborted update: %v, want boom", err)
	}
	if after, _ := s.GetSession(ctx, "t/u"); after.ExecutionCount != 4 {
		t.Errorf("aborted update stored count %d", after.ExecutionCount)
	}
}

func testSessionConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	sess := sampleSession("", "c", "sb", time.Now())
	sess.ExecutionCount = 0
	mustCreateSession(t, s, sess)
	checkNoLostUpdates(t, func() error {
		_, err := s.UpdateSession(ctx, "/c", func(sess *store.Session) error {
			sess.ExecutionCount++
			return nil
		})
		return err
	}, func() (int, error) {
		got, err := s.GetSession(ctx, "/c")
		if err != nil {
			return 0, err
		}
		return got.ExecutionCount, nil
	})
}

func testSessionDeletedWithSandbox(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	mustCreateSandbox(t, s, "other")
	mustCreateSession(t, s, sampleSession("", "gone", "sb", time.Now()))
	mustCreateSession(t, s, sampleSession("", "keep", "other", time.Now()))
	if err := s.DeleteSandbox(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSession(ctx, "/gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("session after its sandbox's delete: %v, want not found", err)
	}
	if _, err := s.GetSession(ctx, "/keep"); err != nil {
		t.Errorf("another sandbox's session: %v", err)
	}
}

func testReapableSandboxes(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Microsecond)
	for _, sb := range []struct {
		id, managedBy, pool, status string
		age, failedAgo              time.Duration
	}{
		{"user", "", "", "running", time.Hour, 0},               // a client's: never
		{"user-failed", "", "", "failed", time.Hour, time.Hour}, // a client's: never
		{"orphan-ctx", "contexts", "", "running", time.Hour, 0}, // nothing refers to it
		{"orphan-ses", "sessions", "", "succeeded", 2 * time.Hour, 0},
		{"young", "sessions", "", "running", 0, 0},           // within the grace period
		{"pending", "sessions", "", "pending", time.Hour, 0}, // being made
		{"pooled", "contexts", "python", "running", time.Hour, 0},
		{"in-session", "sessions", "", "running", time.Hour, 0},
		{"in-context", "contexts", "", "running", time.Hour, 0},
		{"in-run", "runs", "", "running", time.Hour, 0},
		{"run-ended", "runs", "", "running", 90 * time.Minute, 0},              // its run ended: an orphan
		{"failed-old", "sessions", "", "failed", 3 * time.Hour, 2 * time.Hour}, // referenced, but failed long ago
		{"failed-new", "sessions", "", "failed", 3 * time.Hour, time.Minute},
	} {
		rec := sample(sb.id)
		rec.ManagedBy, rec.Pool, rec.Status = sb.managedBy, sb.pool, sb.status
		rec.CreatedAt, rec.UpdatedAt = base.Add(-sb.age), base.Add(-sb.failedAgo)
		if err := s.CreateSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	mustCreateSession(t, s, sampleSession("t", "s", "in-session", base))
	mustCreateSession(t, s, sampleSession("t", "f1", "failed-old", base))
	mustCreateSession(t, s, sampleSession("t", "f2", "failed-new", base))
	mustCreateContext(t, s, sampleContext("ctx-1", "in-context", base))
	active, ended := sampleRun("run-1", "b", base), sampleRun("run-2", "b", base)
	active.SandboxID, ended.SandboxID, ended.Status = "in-run", "run-ended", "succeeded"
	mustCreateRun(t, s, active)
	mustCreateRun(t, s, ended)
	got, err := s.ReapableSandboxes(ctx, base.Add(-time.Minute), base.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, sb := range got {
		ids = append(ids, sb.ID)
	}
	if diff := cmp.Diff([]string{"failed-old", "orphan-ses", "run-ended", "orphan-ctx"}, ids); diff != "" {
		t.Errorf("reapable, oldest first (-want +got):\n%s", diff)
	}
}
