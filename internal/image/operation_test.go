package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// waitOperation waits until Operations lists one for ref, and returns it.
func waitOperation(t *testing.T, s *Store, ref string) Operation {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, op := range s.Operations() {
			if op.Ref == ref {
				return op
			}
		}
	}
	t.Fatalf("no operation on %s", ref)
	return Operation{}
}

// TestFollow follows a pull in flight: Operations lists it with its
// progress, a follower gets the progress so far and the image, and
// neither a follower that leaves nor one that comes after ends it.
func TestFollow(t *testing.T) {
	reg := newTestRegistry(t, authNone, "", "")
	reg.push(t, "team/app:v1", mixedImage(t))
	reg.hold = make(chan struct{})
	s := newTestStore(t)
	ref := reg.host() + "/team/app:v1"
	ctx := context.Background()

	pulled := make(chan error, 1)
	go func() {
		_, err := s.Ensure(ctx, ref, nil)
		pulled <- err
	}()
	op := waitOperation(t, s, ref)
	if op.Build || op.Err != nil || op.Started.IsZero() {
		t.Errorf("operation in flight = %+v, want a pull that began", op)
	}
	for deadline := time.Now().Add(10 * time.Second); op.Progress.Phase != PhaseResolve && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		op = waitOperation(t, s, ref)
	}
	if op.Progress != (Progress{Phase: PhaseResolve, Item: ref}) {
		t.Errorf("operation's progress = %+v, want the resolve", op.Progress)
	}

	// A follower that gives up leaves the pull running.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Follow(gone, ref, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Follow with a cancelled context: %v", err)
	}
	var prog progressLog
	followed := make(chan *Image, 1)
	go func() {
		img, err := s.Follow(ctx, ref, prog.add)
		if err != nil {
			t.Errorf("Follow: %v", err)
		}
		followed <- img
	}()
	// The follower has the progress so far before the registry answers.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := prog.last(PhaseResolve, ref); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower got no replay of the resolve")
		}
	}
	close(reg.hold)
	if err := <-pulled; err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	img := <-followed
	if img == nil || img.Ref != ref {
		t.Fatalf("Follow = %+v", img)
	}
	if ph := prog.phases(); ph[PhaseDone] != 1 || ph[PhaseUnpack] == 0 {
		t.Errorf("follower's progress phases = %v, want unpacks and one done", ph)
	}
	if ops := s.Operations(); len(ops) != 0 {
		t.Errorf("Operations after the pull = %+v", ops)
	}

	// Stored with nothing in flight: at once; neither: not found.
	if got, err := s.Follow(ctx, ref, nil); err != nil || got.Digest != img.Digest {
		t.Errorf("Follow of a stored image = %v, %v", got, err)
	}
	if _, err := s.Follow(ctx, "example.com/nothing:1", nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Follow of nothing: %v, want ErrNotFound", err)
	}
	if _, err := s.Follow(ctx, "", nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Follow of an empty ref: %v, want ErrInvalidArgument", err)
	}
}

// TestOperationsKeepFailure checks that a failed build is listed with its
// error until a build of the same image succeeds.
func TestOperationsKeepFailure(t *testing.T) {
	cache := t.TempDir()
	s := newTestStore(t, WithCacheDir(cache))
	t.Setenv("PATH", "") // mmdebstrap cannot run
	ctx := context.Background()
	const ref = "agent2env/node:latest"
	if _, err := s.Build(ctx, "agent2env/node", nil); err == nil {
		t.Fatal("Build without mmdebstrap succeeded")
	}
	ops := s.Operations()
	if len(ops) != 1 || ops[0].Ref != ref || !ops[0].Build || ops[0].Err == nil || ops[0].Ended.Before(ops[0].Started) {
		t.Fatalf("Operations after a failed build = %+v", ops)
	}
	if _, err := s.Follow(ctx, ref, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Follow after a failed build: %v, want ErrNotFound", err)
	}

	// A cancelled build is no failure: the one before stays listed.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Build(gone, "agent2env/node", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Build: %v", err)
	}
	if ops := s.Operations(); len(ops) != 1 || ops[0].Err == nil {
		t.Errorf("Operations after a cancelled build = %+v", ops)
	}

	rootfs := tarBytes(t, entry{name: "./", typ: tar.TypeDir}, entry{name: "./usr/bin/node", body: "fake node", mode: 0o755})
	if err := os.WriteFile(filepath.Join(cache, recipes[ref].hash()+".tar"), rootfs, 0o644); err != nil {
		t.Fatal(err)
	}
	var prog progressLog
	if _, err := s.Build(ctx, "agent2env/node", prog.add); err != nil {
		t.Fatal(err)
	}
	if ops := s.Operations(); len(ops) != 0 {
		t.Errorf("Operations after a build that succeeded = %+v", ops)
	}
	// The built layer's unpack and hashing have totals: percents.
	unpacks := 0
	for _, ev := range prog.events {
		if ev.Phase == PhaseUnpack {
			unpacks++
			if ev.Total != int64(len(rootfs)) {
				t.Errorf("unpack progress %+v, want a total of %d", ev, len(rootfs))
			}
		}
	}
	if unpacks == 0 {
		t.Errorf("no unpack progress: %+v", prog.events)
	}
	if _, ok := prog.last(PhaseBuild, "hashing "+recipes[ref].hash()+".tar"); !ok {
		t.Errorf("no hashing progress: %+v", prog.events)
	}
}

func TestIsBuiltin(t *testing.T) {
	tests := []struct {
		ref  string
		want bool
	}{
		{"agent2env/code-interpreter", true},
		{"agent2env/python:latest", true},
		{"agent2env/python:3.12", false},
		{"agent2env/ruby", false},
		{"python:3.12", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsBuiltin(tt.ref); got != tt.want {
			t.Errorf("IsBuiltin(%q) = %v, want %v", tt.ref, got, tt.want)
		}
	}
	if got := Builtins(); len(got) != len(recipes) || got[0] != "agent2env/agent:latest" {
		t.Errorf("Builtins() = %v", got)
	}
}
