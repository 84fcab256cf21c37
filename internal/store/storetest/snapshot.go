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

// snapshotTests are Run's cases for store.Snapshots.
var snapshotTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"SnapshotCreateGetDelete", testSnapshotCreateGetDelete},
	{"SnapshotNotFound", testSnapshotNotFound},
	{"SnapshotListUpdate", testSnapshotListUpdate},
	{"SnapshotOutlivesSandbox", testSnapshotOutlivesSandbox},
}

func sampleSnapshot(id, sandbox, tenant string, created time.Time) *store.Snapshot {
	return &store.Snapshot{ID: id, SandboxID: sandbox, Image: "agent2env/python", Status: "ready", Tenant: tenant,
		CreatedAt: created.UTC()}
}

func testSnapshotCreateGetDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	full := &store.Snapshot{ID: "snap-000000000002", SandboxID: "sbx-1", Image: "python:3.12", Template: "py",
		TemplateVersion: 3, Env: map[string]string{"A": "1", "Ü": "✓ 'q'"}, CPU: "500m", Memory: "1Gi", Runtime: "oci", Status: "failed", Error: "dump: ü→✓ 'quoted'", Stopped: true,
		SizeBytes: 5 << 30, Tenant: "acme", Spec: []byte(`{"image":"python:3.12"}`), Contexts: []byte(`[{"id":"ctx-1"}]`), CreatedAt: now.UTC()}
	// What a create leaves in the record it was given is what a read
	// returns: its time rounded down to microseconds.
	for _, want := range []*store.Snapshot{sampleSnapshot("snap-000000000001", "sbx-1", "", now), full} {
		if err := s.CreateSnapshot(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSnapshot(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("get %s (-want +got):\n%s", want.ID, diff)
		}
	}
	if err := s.CreateSnapshot(ctx, sampleSnapshot("snap-000000000001", "sbx-2", "", now)); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate create: %v, want already exists", err)
	}
	if err := s.DeleteSnapshot(ctx, "snap-000000000001"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(ctx, "snap-000000000001"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v, want not found", err)
	}
}

func testSnapshotNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["get"] = s.GetSnapshot(ctx, "nope")
	_, checks["update"] = s.UpdateSnapshot(ctx, "nope", func(*store.Snapshot) error { return nil })
	checks["delete"] = s.DeleteSnapshot(ctx, "nope")
	for op, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s unknown id: %v, want not found", op, err)
		}
	}
}

func testSnapshotListUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	for i, sn := range []*store.Snapshot{
		sampleSnapshot("snap-a", "sbx-1", "t1", now),
		sampleSnapshot("snap-b", "sbx-2", "t1", now.Add(time.Second)),
		sampleSnapshot("snap-c", "sbx-1", "t2", now.Add(2*time.Second)),
	} {
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	ids := func(f store.SnapshotFilter) []string {
		t.Helper()
		list, err := s.ListSnapshots(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sn := range list {
			out = append(out, sn.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    store.SnapshotFilter
		want []string
	}{
		{store.SnapshotFilter{}, []string{"snap-c", "snap-b", "snap-a"}},
		{store.SnapshotFilter{SandboxID: "sbx-1"}, []string{"snap-c", "snap-a"}},
		{store.SnapshotFilter{Tenant: "t1"}, []string{"snap-b", "snap-a"}},
		{store.SnapshotFilter{SandboxID: "sbx-1", Tenant: "t1"}, []string{"snap-a"}},
		{store.SnapshotFilter{SandboxID: "none"}, nil},
	} {
		if diff := cmp.Diff(tc.want, ids(tc.f)); diff != "" {
			t.Errorf("list %+v (-want +got):\n%s", tc.f, diff)
		}
	}
	got, err := s.UpdateSnapshot(ctx, "snap-a", func(sn *store.Snapshot) error {
		sn.Status, sn.SizeBytes = "ready", 1234
		return nil
	})
	if err != nil || got.SizeBytes != 1234 {
		t.Fatalf("update = %+v, %v", got, err)
	}
	abort := errors.New("abort")
	if _, err := s.UpdateSnapshot(ctx, "snap-a", func(sn *store.Snapshot) error {
		sn.SizeBytes = 1
		return abort
	}); !errors.Is(err, abort) {
		t.Errorf("aborted update: %v, want its error", err)
	}
	if got, err := s.GetSnapshot(ctx, "snap-a"); err != nil || got.SizeBytes != 1234 {
		t.Errorf("after an aborted update: %+v, %v; want size 1234", got, err)
	}
}

// A snapshot is kept when the sandbox it was taken of is deleted.
func testSnapshotOutlivesSandbox(t *testing.T, s store.Store) {
	ctx := context.Background()
	sb := sample("sbx-gone")
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(ctx, sampleSnapshot("snap-kept", sb.ID, "", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(ctx, "snap-kept"); err != nil {
		t.Errorf("snapshot after its sandbox was deleted: %v", err)
	}
}
