package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// newWarmEnv returns an env whose warm pool holds one running pooled
// sandbox, claimed as the pools claim theirs.
func newWarmEnv(t *testing.T) (*env, *store.Sandbox) {
	t.Helper()
	e := newEnv(t, Config{})
	warm, err := e.m.CreatePooled(context.Background(), CreateRequest{Image: "alpine"}, "p")
	if err != nil {
		t.Fatal(err)
	}
	e.m.pool = claimOne{e.m, warm}
	return e, warm
}

// claimOne is a warm pool of one pooled sandbox, which it claims with the
// request's owner, TTL and metadata as package pool does.
type claimOne struct {
	m  *Manager
	sb *store.Sandbox
}

func (w claimOne) TakeSandbox(ctx context.Context, req CreateRequest) (*store.Sandbox, bool) {
	if req.Image != w.sb.Image {
		return nil, false
	}
	sb, err := w.m.Claim(ctx, w.sb.ID, Claim{Owner: req.ManagedBy, TTL: req.TTL, Metadata: req.Metadata})
	return sb, err == nil
}

// A sandbox taken from a warm pool gets the request's metadata; metadata
// that cannot be set is refused before anything is taken.
func TestMetadataFromPool(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		metadata map[string]string
		class    error
	}{
		{"labelled", map[string]string{"team": "x"}, nil},
		{"no metadata", nil, nil},
		{"over the bounds", map[string]string{"": "v"}, errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, warm := newWarmEnv(t)
			sb, err := e.m.Create(ctx, CreateRequest{Image: warm.Image, Metadata: tc.metadata})
			if !errors.Is(err, tc.class) || (tc.class == nil) != (err == nil) {
				t.Fatalf("create: %v, want %v", err, tc.class)
			}
			if err != nil {
				if got, err := e.st.GetSandbox(ctx, warm.ID); err != nil || got.Pool != "p" || len(got.Metadata) != 0 {
					t.Errorf("the warm sandbox after a refused create: %+v, %v", got, err)
				}
				return
			}
			if sb.ID != warm.ID || fmt.Sprint(sb.Metadata) != fmt.Sprint(tc.metadata) {
				t.Errorf("took %s with metadata %v, want %s with %v", sb.ID, sb.Metadata, warm.ID, tc.metadata)
			}
		})
	}
}

// A sandbox taken from a warm pool gets the request's TTL from the moment
// it is taken; a TTL out of bounds is refused before anything is taken.
func TestTTLFromPool(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		ttl     int
		expires time.Duration // 0: never
		class   error
	}{
		{"ttl", 60, time.Minute, nil},
		{"no expiry", 0, 0, nil},
		{"negative", -1, 0, errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, warm := newWarmEnv(t)
			e.clock.Advance(time.Hour)
			sb, err := e.m.Create(ctx, CreateRequest{Image: warm.Image, TTL: ptr(tc.ttl)})
			if !errors.Is(err, tc.class) || (tc.class == nil) != (err == nil) {
				t.Fatalf("create: %v, want %v", err, tc.class)
			}
			if err != nil {
				if got, err := e.st.GetSandbox(ctx, warm.ID); err != nil || got.TTL != warm.TTL {
					t.Errorf("the warm sandbox after a refused create: %+v, %v", got, err)
				}
				return
			}
			want := "never"
			if tc.expires > 0 {
				want = e.clock.Now().Add(tc.expires).UTC().String()
			}
			got := "never"
			if sb.ExpiresAt != nil {
				got = sb.ExpiresAt.UTC().String()
			}
			if sb.ID != warm.ID || sb.TTL != tc.ttl || got != want {
				t.Errorf("took %s with ttl %d expiring %s, want %s with ttl %d expiring %s", sb.ID, sb.TTL, got, warm.ID, tc.ttl, want)
			}
		})
	}
}

// SetExpiry's time is the one the sweep honours: a sandbox that never
// expired, or would have later, goes once it passes, and not before.
func TestSetExpirySweep(t *testing.T) {
	ctx := context.Background()
	for _, ttl := range []int{0, 600} {
		t.Run(fmt.Sprint("ttl ", ttl), func(t *testing.T) {
			e := newEnv(t, Config{})
			id := e.create(t, CreateRequest{TTL: ptr(ttl)}).ID
			e.waitStatus(t, id, "running")
			sb, err := e.m.SetExpiry(ctx, id, e.clock.Now().Add(30*time.Second))
			if err != nil || sb.TTL != 30 || !sb.ExpiresAt.Equal(epoch.Add(30*time.Second)) {
				t.Fatalf("set expiry: ttl %d, expires %v, %v", sb.TTL, sb.ExpiresAt, err)
			}
			e.clock.Advance(29 * time.Second)
			e.m.sweep(ctx)
			if _, err := e.m.Get(ctx, id); err != nil {
				t.Fatalf("gone before its expiry: %v", err)
			}
			e.clock.Advance(2 * time.Second)
			e.m.sweep(ctx)
			if _, err := e.m.Get(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("kept after its expiry: %v", err)
			}
		})
	}
	e := newEnv(t, Config{})
	id := e.running(t)
	if _, err := e.m.SetExpiry(ctx, id, e.clock.Now()); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an expiry now: %v, want invalid", err)
	}
	if _, err := e.m.SetExpiry(ctx, "nope", e.clock.Now().Add(time.Hour)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an unknown sandbox: %v, want not found", err)
	}
	// Past its expiry, before the sweep has come to it: not brought back.
	id = e.create(t, CreateRequest{TTL: ptr(10)}).ID
	e.waitStatus(t, id, "running")
	e.clock.Advance(11 * time.Second)
	if _, err := e.m.SetExpiry(ctx, id, e.clock.Now().Add(time.Hour)); !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != api.CodeConflict {
		t.Errorf("an expired sandbox: %v (code %q), want a conflict", err, errdefs.Code(err))
	}
	e.m.sweep(ctx)
	if _, err := e.m.Get(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the expired sandbox after a refused renew and a sweep: %v, want gone", err)
	}
}

// A sandbox waiting in a warm pool is no one's yet: as it is not listed,
// no operation by id finds it (SANDBOX_NOT_FOUND) and nothing changes it,
// until it is claimed. Its pool still reaches and deletes it.
func TestPooledNotFoundByID(t *testing.T) {
	ctx := context.Background()
	e, warm := newWarmEnv(t)
	id := warm.ID
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"get", func() error { _, err := e.m.Get(ctx, id); return err }},
		{"lookup", func() error { _, _, err := e.m.Lookup(ctx, id); return err }},
		{"agent", func() error { _, err := e.m.Agent(ctx, id); return err }},
		{"exec", func() error { _, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"true"}}); return err }},
		{"logs", func() error { _, err := e.m.Logs(ctx, id, 0); return err }},
		{"stop", func() error { _, err := e.m.Stop(ctx, id); return err }},
		{"restart", func() error { _, err := e.m.Restart(ctx, id); return err }},
		{"pause", func() error { _, err := e.m.Pause(ctx, id); return err }},
		{"check dead", func() error { _, err := e.m.CheckDead(ctx, id); return err }},
		{"snapshot", func() error { _, err := e.m.Snapshot(ctx, id, SnapshotRequest{}); return err }},
		{"patch metadata", func() error { v := "x"; _, err := e.m.PatchMetadata(ctx, id, map[string]*string{"k": &v}); return err }},
		{"set expiry", func() error { _, err := e.m.SetExpiry(ctx, id, e.clock.Now().Add(time.Hour)); return err }},
		{"delete", func() error { return e.m.Delete(ctx, id) }},
	} {
		t.Run(op.name, func(t *testing.T) {
			if err := op.do(); !errors.Is(err, errdefs.ErrNotFound) || errdefs.Code(err) != api.CodeSandboxNotFound {
				t.Errorf("%s of a pooled sandbox: %v (code %q), want SANDBOX_NOT_FOUND", op.name, err, errdefs.Code(err))
			}
			got, err := e.st.GetSandbox(ctx, id)
			if err != nil || got.Pool != "p" || got.Status != string(api.StatusRunning) || len(got.Metadata) != 0 || got.ExpiresAt != nil {
				t.Errorf("the pooled sandbox after %s: %+v, %v", op.name, got, err)
			}
		})
	}
	if _, err := e.m.PooledAgent(ctx, id); err != nil {
		t.Errorf("the pool's agent of its sandbox: %v", err)
	}
	// Claimed, it is the claimer's: found, and no longer the pool's.
	if _, err := e.m.Claim(ctx, id, Claim{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Get(ctx, id); err != nil {
		t.Errorf("get of the claimed sandbox: %v", err)
	}
	if err := e.m.DeletePooled(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("the pool's delete of a claimed sandbox: %v, want ErrFailedPrecondition", err)
	}
	if err := e.m.Delete(ctx, id); err != nil {
		t.Errorf("delete of the claimed sandbox: %v", err)
	}
}

// A pool deletes its own sandboxes with DeletePooled.
func TestDeletePooled(t *testing.T) {
	ctx := context.Background()
	e, warm := newWarmEnv(t)
	if err := e.m.DeletePooled(ctx, warm.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.GetSandbox(ctx, warm.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the pooled sandbox after DeletePooled: %v, want it gone", err)
	}
}

func TestCheckMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   map[string]string
		ok   bool
	}{
		{"plain", map[string]string{"team": "a", "run": ""}, true},
		{"empty key", map[string]string{"": "a"}, false},
		{"NUL in a key", map[string]string{"te\x00am": "a"}, false},
		{"NUL in a value", map[string]string{"team": "a\x00b"}, false},
		{"a value too long", map[string]string{"team": strings.Repeat("x", MaxMetadataValue+1)}, false},
	} {
		if err := checkMetadata(tc.md); (err == nil) != tc.ok || err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: checkMetadata = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
