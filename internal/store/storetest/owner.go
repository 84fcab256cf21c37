package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/store"
)

// ownerTests are Run's cases for what sandboxes make: owned sandboxes,
// and the sessions and contexts of their tenants.
var ownerTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"OwnedSandboxes", testOwnedSandboxes},
	{"WithOwned", testWithOwned},
	{"IdleContexts", testIdleContexts},
}

// testOwnedSandboxes: Owner and Tenant are kept, and SandboxFilter.Owner
// selects a sandbox's owned ones.
func testOwnedSandboxes(t *testing.T, s store.Store) {
	ctx := context.Background()
	parent := sample("parent")
	parent.Tenant = "key-a"
	if err := s.CreateSandbox(ctx, parent); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"child-1", "child-2"} {
		sb := sample(id)
		sb.Owner, sb.Tenant = "parent", "key-a"
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	mustCreateSandbox(t, s, "unrelated")
	got, err := s.GetSandbox(ctx, "child-1")
	if err != nil || got.Owner != "parent" || got.Tenant != "key-a" {
		t.Fatalf("child-1: %+v, %v; want owner parent, tenant key-a", got, err)
	}
	owned, _, err := s.ListSandboxPage(ctx, store.SandboxFilter{Owner: "parent"}, store.Page{})
	if err != nil || len(owned) != 2 || owned[0].ID != "child-1" || owned[1].ID != "child-2" {
		t.Fatalf("owned by parent: %v, %v; want child-1, child-2", ids(owned), err)
	}
	if owned, _, err := s.ListSandboxPage(ctx, store.SandboxFilter{Owner: "unrelated"}, store.Page{}); err != nil || len(owned) != 0 {
		t.Fatalf("owned by unrelated: %v, %v; want none", ids(owned), err)
	}
}

// testWithOwned: a tenant's lists with WithOwned add the sessions and
// contexts made in the tenant's sandboxes (auth.SandboxTenant) and runs
// (auth.RunTenant), and no other tenant's.
func testWithOwned(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	for _, sb := range []struct{ id, tenant string }{{"mine", "key-a"}, {"theirs", "key-b"}} {
		rec := sample(sb.id)
		rec.Tenant = sb.tenant
		if err := s.CreateSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct{ id, tenant string }{{"my-run", "key-a"}, {"their-run", "key-b"}} {
		run := sampleRun(r.id, "batch", now)
		run.Tenant = r.tenant
		mustCreateRun(t, s, run)
	}
	for i, tenant := range []string{"key-a", auth.SandboxTenant("mine"), auth.RunTenant("my-run"), auth.SandboxTenant("theirs"),
		auth.RunTenant("their-run"), "key-b"} {
		mustCreateSession(t, s, sampleSession(tenant, "s", "mine", now.Add(time.Duration(i)*time.Second)))
		c := sampleContext("c"+string(rune('0'+i)), "mine", now.Add(time.Duration(i)*time.Second))
		c.Tenant = tenant
		mustCreateContext(t, s, c)
	}
	want := []string{"key-a", auth.SandboxTenant("mine"), auth.RunTenant("my-run")}
	for _, withOwned := range []bool{false, true} {
		sessions, err := s.ListSessions(ctx, store.SessionFilter{Tenant: "key-a", WithOwned: withOwned})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := s.ListContexts(ctx, store.ContextFilter{ByTenant: true, Tenant: "key-a", WithOwned: withOwned})
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		if withOwned {
			n = len(want)
		}
		if len(sessions) != n || len(cs) != n {
			t.Fatalf("WithOwned %v: %d sessions, %d contexts; want %d of each", withOwned, len(sessions), len(cs), n)
		}
		for i := range n {
			if sessions[i].Tenant != want[i] || cs[i].Tenant != want[i] {
				t.Errorf("WithOwned %v: item %d of tenants %s and %s, want %s", withOwned, i, sessions[i].Tenant, cs[i].Tenant, want[i])
			}
		}
	}
}

// testIdleContexts: IdleSince selects the contexts in no session last
// used before it.
func testIdleContexts(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateSandbox(t, s, "sb")
	now := time.Now()
	for _, c := range []struct {
		id      string
		session string
		used    time.Duration
	}{{"old", "", -time.Hour}, {"recent", "", -time.Minute}, {"old-in-session", "t/s", -time.Hour}} {
		rec := sampleContext(c.id, "sb", now.Add(c.used-time.Second))
		rec.SessionName, rec.SessionKey = c.session, c.session
		mustCreateContext(t, s, rec)
	}
	idle, err := s.ListContexts(ctx, store.ContextFilter{IdleSince: now.Add(-30 * time.Minute)})
	if err != nil || len(idle) != 1 || idle[0].ID != "old" {
		t.Fatalf("idle contexts: %v, %v; want old", idle, err)
	}
}

func ids(sbs []*store.Sandbox) []string {
	out := make([]string, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}
