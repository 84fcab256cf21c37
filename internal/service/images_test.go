package service

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
)

// scriptedStore is an ImageStore that answers every call with what the
// test set, reporting its progress events first, and records the calls.
type scriptedStore struct {
	imgs     []*image.Image
	err      error
	progress []image.Progress
	ops      []image.Operation
	calls    []string // "<op> <ref or path>"
}

func (s *scriptedStore) CreateTemp(pattern string) (*os.File, error) {
	return nil, errors.New("not scripted")
}

func (s *scriptedStore) run(op, ref string, p image.ProgressFunc) ([]*image.Image, error) {
	s.calls = append(s.calls, op+" "+ref)
	for _, ev := range s.progress {
		if p != nil {
			p(ev)
		}
	}
	return s.imgs, s.err
}

func (s *scriptedStore) one(op, ref string, p image.ProgressFunc) (*image.Image, error) {
	imgs, err := s.run(op, ref, p)
	if err != nil {
		return nil, err
	}
	return imgs[0], nil
}

func (s *scriptedStore) List(ctx context.Context) ([]*image.Image, error) {
	return s.run("list", "", nil)
}

func (s *scriptedStore) Pull(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return s.one("pull", ref, p)
}

func (s *scriptedStore) Build(ctx context.Context, name string, p image.ProgressFunc) (*image.Image, error) {
	return s.one("build", name, p)
}

func (s *scriptedStore) Import(ctx context.Context, path string, p image.ProgressFunc) ([]*image.Image, error) {
	return s.run("import", path, p)
}

func (s *scriptedStore) Follow(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return s.one("follow", ref, p)
}

func (s *scriptedStore) Operations() []image.Operation { return s.ops }

func (s *scriptedStore) Remove(ctx context.Context, ref string) error {
	_, err := s.run("remove", ref, nil)
	return err
}

var created = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	storedA = &image.Image{Ref: "docker.io/library/a:latest", Digest: "sha256:da", ID: "sha256:ia", Size: 42,
		Layers: []string{"/l/1", "/l/2"}, Created: created, Config: image.Config{Env: []string{"X=y"}}}
	storedB = &image.Image{Ref: "b", Digest: "sha256:db", ID: "sha256:ib", Size: 7, Created: created}
	viewA   = api.Image{Ref: "docker.io/library/a:latest", Digest: "sha256:da", ID: "sha256:ia", Size: 42, Layers: 2, Created: created,
		Status: api.ImageReady}
	viewB = api.Image{Ref: "b", Digest: "sha256:db", ID: "sha256:ib", Size: 7, Created: created, Status: api.ImageReady}
)

func TestImagesList(t *testing.T) {
	started := created.Add(-time.Minute)
	building := image.Operation{Ref: "agent2env/code-interpreter:latest", Build: true, Started: started,
		Progress: image.Progress{Phase: image.PhaseBuild, Item: "Setting up python3-numpy"}}
	pulling := image.Operation{Ref: storedA.Ref, Started: started,
		Progress: image.Progress{Phase: image.PhaseDownload, Item: "sha256:l", Current: 5, Total: 10}}
	failed := image.Operation{Ref: "agent2env/node:latest", Build: true, Started: started, Ended: created,
		Err: errors.New("build image agent2env/node:latest: mmdebstrap: exit status 1")}
	builtins := []string{"agent2env/code-interpreter:latest", "agent2env/node:latest", "agent2env/python:latest"}
	tests := []struct {
		name     string
		stored   []*image.Image
		ops      []image.Operation
		builtins []string
		want     []api.Image
	}{
		{name: "none is an empty list", want: []api.Image{}},
		{name: "the API's view, by ref", stored: []*image.Image{storedA, storedB}, want: []api.Image{viewB, viewA}},
		{name: "built-in images not stored are missing", stored: []*image.Image{storedB}, builtins: builtins, want: []api.Image{
			{Ref: "agent2env/code-interpreter:latest", Status: api.ImageMissing},
			{Ref: "agent2env/node:latest", Status: api.ImageMissing},
			{Ref: "agent2env/python:latest", Status: api.ImageMissing},
			viewB,
		}},
		{name: "operations in flight and failed", stored: []*image.Image{storedA}, ops: []image.Operation{building, pulling, failed},
			builtins: builtins, want: []api.Image{
				{Ref: "agent2env/code-interpreter:latest", Status: api.ImageBuilding, Started: &started,
					Progress: &api.ImageProgress{Phase: "build", Item: "Setting up python3-numpy"}},
				{Ref: "agent2env/node:latest", Status: api.ImageFailed, Started: &started, Error: failed.Err.Error()},
				{Ref: "agent2env/python:latest", Status: api.ImageMissing},
				{Ref: viewA.Ref, Digest: viewA.Digest, ID: viewA.ID, Size: viewA.Size, Layers: viewA.Layers, Created: viewA.Created,
					Status: api.ImagePulling, Started: &started,
					Progress: &api.ImageProgress{Phase: "download", Item: "sha256:l", Current: 5, Total: 10}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewImages(&scriptedStore{imgs: tt.stored, ops: tt.ops}, WithBuiltins(tt.builtins...)).List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || got == nil {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImageOps(t *testing.T) {
	progress := []image.Progress{{Phase: image.PhaseDownload, Item: "sha256:l", Current: 5, Total: 10}, {Phase: image.PhaseDone, Item: "a"}}
	wantProgress := []api.ImageProgress{{Phase: "download", Item: "sha256:l", Current: 5, Total: 10}, {Phase: "done", Item: "a"}}
	failed := errdefs.NotFound("image a not found")
	tests := []struct {
		name      string
		op        func(*Images) (ImageOp, error)
		store     scriptedStore
		class     error // of the check, before anything runs
		runErr    error
		wantCalls []string
		want      []api.Image
	}{
		{name: "pull", op: func(s *Images) (ImageOp, error) { return s.Pull("a") },
			store: scriptedStore{imgs: []*image.Image{storedA}}, wantCalls: []string{"pull a"}, want: []api.Image{viewA}},
		{name: "pull without ref", op: func(s *Images) (ImageOp, error) { return s.Pull("") }, class: errdefs.ErrInvalidArgument},
		{name: "pull fails", op: func(s *Images) (ImageOp, error) { return s.Pull("a") },
			store: scriptedStore{err: failed}, runErr: failed, wantCalls: []string{"pull a"}},
		{name: "build", op: func(s *Images) (ImageOp, error) { return s.Build("agent2env/python") },
			store: scriptedStore{imgs: []*image.Image{storedB}}, wantCalls: []string{"build agent2env/python"}, want: []api.Image{viewB}},
		{name: "build without name", op: func(s *Images) (ImageOp, error) { return s.Build("") }, class: errdefs.ErrInvalidArgument},
		{name: "follow", op: func(s *Images) (ImageOp, error) { return s.Follow("agent2env/python") },
			store: scriptedStore{imgs: []*image.Image{storedB}}, wantCalls: []string{"follow agent2env/python"}, want: []api.Image{viewB}},
		{name: "follow without ref", op: func(s *Images) (ImageOp, error) { return s.Follow("") }, class: errdefs.ErrInvalidArgument},
		{name: "import gives every image", op: func(s *Images) (ImageOp, error) { return s.Import("/tmp/x.tar"), nil },
			store: scriptedStore{imgs: []*image.Image{storedA, storedB}}, wantCalls: []string{"import /tmp/x.tar"}, want: []api.Image{viewA, viewB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.store
			st.progress = progress
			run, err := tt.op(NewImages(&st))
			checkErr(t, err, tt.class, "")
			if tt.class != nil {
				if run != nil || len(st.calls) > 0 {
					t.Errorf("a refused operation ran: %v", st.calls)
				}
				return
			}
			var got []api.ImageProgress
			imgs, err := run(context.Background(), func(p api.ImageProgress) { got = append(got, p) })
			if err != tt.runErr {
				t.Fatalf("run: %v, want %v", err, tt.runErr)
			}
			if diff := cmp.Diff(tt.want, imgs); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantProgress, got); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, st.calls); diff != "" {
				t.Errorf("store calls (-want +got):\n%s", diff)
			}
			// Without a progress function, the operation runs all the same.
			if _, err := run(context.Background(), nil); err != tt.runErr {
				t.Errorf("run without progress: %v, want %v", err, tt.runErr)
			}
		})
	}
}

func TestImagesRemove(t *testing.T) {
	st := &scriptedStore{err: errdefs.NotFound("image x not found")}
	err := NewImages(st).Remove(context.Background(), "x")
	checkErr(t, err, errdefs.ErrNotFound, "")
	if diff := cmp.Diff([]string{"remove x"}, st.calls); diff != "" {
		t.Errorf("store calls (-want +got):\n%s", diff)
	}
}

// An image that snapshots need is refused (409, naming them) and left
// stored; one that none needs is removed.
func TestImagesRemovePinned(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pinned    []string
		wantCalls []string
	}{
		{"pinned", []string{"snap-a", "snap-b"}, nil},
		{"free", nil, []string{"remove x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &scriptedStore{}
			var asked string
			err := NewImages(st, WithPins(func(_ context.Context, ref string) ([]string, error) {
				asked = ref
				return tc.pinned, nil
			})).Remove(context.Background(), "x")
			if asked != "x" {
				t.Errorf("pins asked for %q; want x", asked)
			}
			if tc.pinned != nil {
				checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
				if err != nil && !strings.Contains(err.Error(), "snap-a, snap-b") {
					t.Errorf("error %q does not name the snapshots", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCalls, st.calls); diff != "" {
				t.Errorf("store calls (-want +got):\n%s", diff)
			}
		})
	}
}
