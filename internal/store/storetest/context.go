package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// contextTests are Run's cases for store.Contexts.
var contextTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"ContextCreateGet", testContextCreateGet},
	{"ContextNoSandbox", testContextNoSandbox},
	{"ContextDuplicate", testContextDuplicate},
	{"ContextNotFound", testContextNotFound},
	{"ContextList", testContextList},
	{"ContextUpdate", testContextUpdate},
	{"ContextUpdateAbort", testContextUpdateAbort},
	{"ContextConcurrentUpdates", testContextConcurrentUpdates},
	{"ContextCountExecution", testContextCountExecution},
	{"ContextDeletedWithSandbox", testContextDeletedWithSandbox},
}

// sampleContext returns a context of sandbox sbID using every field.
func sampleContext(id, sbID string, created time.Time) *store.Context {
	created = created.UTC().Truncate(time.Microsecond)
	return &store.Context{
		ID: id, SandboxID: sbID, Language: "python", Type: "jupyter", SessionName: "sess", SessionKey: "tenant/sess",
		Name: "analysis ✓", Description: "a context\nwith two lines", Tenant: "tenant", WorkingDir: "/home/user/ü", Env: map[string]string{"A": "1", "UNICODE": "ü→✓"},
		OwnsSandbox: true, CreatedAt: created, LastUsedAt: created.Add(time.Second), ExecutionCount: 7,
	}
}

func mustCreateSandbox(t *testing.T, s store.Store, id string) {
	t.Helper()
	if err := s.CreateSandbox(context.Background(), sample(id)); err != nil {
		t.Fatalf("create sandbox %s: %v", id, err)
	}
}

func mustCreateContext(t *testing.T, s store.Store, c *store.Context) {
	t.Helper()
	if err := s.CreateContext(context.Background(), c); err != nil {
		t.Fatalf("create context %s: %v", c.ID, err)
	}
}

func testContextCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	want := sampleContext("ctx-1", "sb", time.Now())
	mustCreateContext(t, s, want)
	got, err := s.GetContext(ctx, "ctx-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}

	// Zero values round-trip too.
	bare := &store.Context{ID: "ctx-2", SandboxID: "sb", Language: "javascript", Type: "node",
		CreatedAt: now(), LastUsedAt: now()}
	mustCreateContext(t, s, bare)
	got, err = s.GetContext(ctx, "ctx-2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bare, got); diff != "" {
		t.Errorf("get bare (-want +got):\n%s", diff)
	}
}

func testContextNoSandbox(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateContext(ctx, sampleContext("ctx-x", "nope", time.Now())); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("create in unknown sandbox: %v, want not found", err)
	}
	if _, err := s.GetContext(ctx, "ctx-x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("context of a failed create: %v, want not found", err)
	}
}

func testContextDuplicate(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	mustCreateSandbox(t, s, "sb2")
	first := sampleContext("dup", "sb", time.Now())
	mustCreateContext(t, s, first)
	again := sampleContext("dup", "sb2", time.Now())
	again.Language = "r"
	if err := s.CreateContext(ctx, again); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate create: %v, want already exists", err)
	}
	if got, err := s.GetContext(ctx, "dup"); err != nil || got.SandboxID != "sb" || got.Language != "python" {
		t.Errorf("after failed duplicate = %+v, %v; want the first", got, err)
	}
}

func testContextNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	called := false
	checks := map[string]error{}
	_, checks["get"] = s.GetContext(ctx, "nope")
	_, checks["update"] = s.UpdateContext(ctx, "nope", func(*store.Context) error {
		called = true
		return nil
	})
	checks["delete"] = s.DeleteContext(ctx, "nope")
	for op, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s unknown id: %v, want not found", op, err)
		}
	}
	if called {
		t.Error("UpdateContext called fn for an unknown context")
	}

	// Delete works once, then reports not found.
	mustCreateSandbox(t, s, "sb")
	mustCreateContext(t, s, sampleContext("gone", "sb", time.Now()))
	if err := s.DeleteContext(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetContext(ctx, "gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v, want not found", err)
	}
	if err := s.DeleteContext(ctx, "gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
}

func testContextList(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.ListContexts(ctx, store.ContextFilter{})
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty list = %#v, %v; want []", got, err)
	}
	mustCreateSandbox(t, s, "sb-a")
	mustCreateSandbox(t, s, "sb-b")
	base := time.Now()
	// Created out of order, to show the list sorts by creation time.
	for _, c := range []struct {
		id, sb, session, key, lang string
		at                         int
	}{
		{"c3", "sb-a", "s2", "/s2", "python", 3},
		{"c1", "sb-a", "s1", "k/s1", "javascript", 1},
		{"c4", "sb-b", "s1", "/s1", "python", 4},
		{"c2", "sb-b", "s2", "/s2", "bash", 2},
		{"c0", "sb-a", "", "", "python", 0},
	} {
		cc := sampleContext(c.id, c.sb, base.Add(time.Duration(c.at)*time.Second))
		cc.SessionName, cc.SessionKey, cc.Language = c.session, c.key, c.lang
		mustCreateContext(t, s, cc)
	}
	tests := []struct {
		name string
		f    store.ContextFilter
		want []string
	}{
		{"all oldest first", store.ContextFilter{}, []string{"c0", "c1", "c2", "c3", "c4"}},
		{"session", store.ContextFilter{SessionName: "s1"}, []string{"c1", "c4"}},
		{"sandbox", store.ContextFilter{SandboxID: "sb-a"}, []string{"c0", "c1", "c3"}},
		{"session and sandbox", store.ContextFilter{SessionName: "s2", SandboxID: "sb-b"}, []string{"c2"}},
		{"session none", store.ContextFilter{SessionName: "nope"}, []string{}},
		{"session is exact", store.ContextFilter{SessionName: "S1"}, []string{}},
		{"sandbox none", store.ContextFilter{SandboxID: "nope"}, []string{}},
		{"empty session matches all", store.ContextFilter{SessionName: "", SandboxID: "sb-b"}, []string{"c2", "c4"}},
		{"both none", store.ContextFilter{SessionName: "s1", SandboxID: "nope"}, []string{}},
		{"session key", store.ContextFilter{SessionKey: "/s1"}, []string{"c4"}},
		{"session key of a tenant", store.ContextFilter{SessionKey: "k/s1"}, []string{"c1"}},
		{"language", store.ContextFilter{Language: "python"}, []string{"c0", "c3", "c4"}},
		{"session key and language", store.ContextFilter{SessionKey: "/s2", Language: "bash"}, []string{"c2"}},
		{"tenant", store.ContextFilter{ByTenant: true, Tenant: "tenant"}, []string{"c0", "c1", "c2", "c3", "c4"}},
		{"other tenant", store.ContextFilter{ByTenant: true, Tenant: "other"}, []string{}},
		{"no tenant", store.ContextFilter{ByTenant: true}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListContexts(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Errorf("list %+v = nil; want a non-nil slice", tt.f)
			}
			ids := []string{}
			for _, c := range got {
				ids = append(ids, c.ID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("list %+v (-want +got):\n%s", tt.f, diff)
			}
		})
	}
	// Listed records are whole.
	got, err = s.ListContexts(ctx, store.ContextFilter{SandboxID: "sb-b", SessionName: "s2"})
	if err != nil || len(got) != 1 {
		t.Fatalf("list = %v, %v", got, err)
	}
	want := sampleContext("c2", "sb-b", base.Add(2*time.Second))
	want.SessionName, want.SessionKey, want.Language = "s2", "/s2", "bash"
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("listed record (-want +got):\n%s", diff)
	}
}

func testContextUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	orig := sampleContext("u", "sb", time.Now())
	mustCreateContext(t, s, orig)
	used := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	var seen store.Context
	updated, err := s.UpdateContext(ctx, "u", func(c *store.Context) error {
		seen = *c
		c.ExecutionCount++
		c.LastUsedAt = used
		c.WorkingDir = "/tmp"
		c.Env = map[string]string{"B": "✓"}
		c.OwnsSandbox = false
		c.ID = "renamed" // ignored: the id is the key
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, &seen); diff != "" {
		t.Errorf("fn saw (-stored +seen):\n%s", diff)
	}
	want := *orig
	want.ExecutionCount, want.LastUsedAt, want.WorkingDir = 8, used, "/tmp"
	want.Env, want.OwnsSandbox = map[string]string{"B": "✓"}, false
	if diff := cmp.Diff(&want, updated); diff != "" {
		t.Errorf("returned (-want +got):\n%s", diff)
	}
	got, err := s.GetContext(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	if _, err := s.GetContext(ctx, "renamed"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get renamed: %v, want not found", err)
	}
}

func testContextUpdateAbort(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	mustCreateContext(t, s, sampleContext("a", "sb", time.Now()))
	before, _ := s.GetContext(ctx, "a")
	boom := errors.New("boom")
	_, err := s.UpdateContext(ctx, "a", func(c *store.Context) error {
		c.ExecutionCount = 99
		c.Env["A"] = "changed"
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update err = %v, want boom", err)
	}
	after, _ := s.GetContext(ctx, "a")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("aborted update changed the context (-before +after):\n%s", diff)
	}
}

func testContextConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	c := sampleContext("c", "sb", time.Now())
	c.ExecutionCount = 0
	mustCreateContext(t, s, c)
	checkNoLostUpdates(t, func() error {
		_, err := s.UpdateContext(ctx, "c", func(c *store.Context) error {
			c.ExecutionCount++
			return nil
		})
		return err
	}, func() (int, error) {
		got, err := s.GetContext(ctx, "c")
		if err != nil {
			return 0, err
		}
		return got.ExecutionCount, nil
	})
}

// CountContextExecution adds one to the count and sets the last use, and
// changes nothing else; concurrent ones are all counted; an unknown id is
// not found.
func testContextCountExecution(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	c := sampleContext("c", "sb", time.Now())
	mustCreateContext(t, s, c)
	at := c.LastUsedAt.Add(time.Minute)
	n, err := s.CountContextExecution(ctx, "c", at)
	if err != nil || n != c.ExecutionCount+1 {
		t.Fatalf("CountContextExecution = %d, %v; want %d", n, err, c.ExecutionCount+1)
	}
	got, err := s.GetContext(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := *c
	want.ExecutionCount, want.LastUsedAt = n, at
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("after CountContextExecution (-want +got):\n%s", diff)
	}
	checkNoLostUpdates(t, func() error {
		_, err := s.CountContextExecution(ctx, "c", at)
		return err
	}, func() (int, error) {
		got, err := s.GetContext(ctx, "c")
		if err != nil {
			return 0, err
		}
		return got.ExecutionCount - n, nil
	})
	if _, err := s.CountContextExecution(ctx, "nope", at); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown id: %v, want not found", err)
	}
}

// checkNoLostUpdates runs increment concurrently and checks that count
// then says each one took effect.
func checkNoLostUpdates(t *testing.T, increment func() error, count func() (int, error)) {
	t.Helper()
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := increment(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, err := count(); err != nil || got != n {
		t.Errorf("count = %d, %v after %d increments: lost updates", got, err, n)
	}
}

func testContextDeletedWithSandbox(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	mustCreateSandbox(t, s, "other")
	mustCreateContext(t, s, sampleContext("c1", "sb", time.Now()))
	mustCreateContext(t, s, sampleContext("c2", "sb", time.Now().Add(time.Second)))
	mustCreateContext(t, s, sampleContext("keep", "other", time.Now()))
	if err := s.DeleteSandbox(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		if _, err := s.GetContext(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("get %s after its sandbox's delete: %v, want not found", id, err)
		}
	}
	if got, err := s.ListContexts(ctx, store.ContextFilter{SandboxID: "sb"}); err != nil || len(got) != 0 {
		t.Errorf("contexts of the deleted sandbox = %v, %v; want none", got, err)
	}
	got, err := s.ListContexts(ctx, store.ContextFilter{})
	if err != nil || len(got) != 1 || got[0].ID != "keep" {
		t.Errorf("contexts after delete = %v, %v; want only keep", got, err)
	}
}
