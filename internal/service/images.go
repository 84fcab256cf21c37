package service

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
)

// ImageStore is what Images needs of the image store (image.Store).
type ImageStore interface {
	List(ctx context.Context) ([]*image.Image, error)
	Pull(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error)
	Build(ctx context.Context, name string, p image.ProgressFunc) (*image.Image, error)
	Import(ctx context.Context, path string, p image.ProgressFunc) ([]*image.Image, error)
	Remove(ctx context.Context, ref string) error
	// Operations returns the pulls and builds in flight and the last
	// failed one of each ref not stored (image.Store.Operations).
	Operations() []image.Operation
	// Follow waits for the pull or build of ref in flight, or returns
	// ref stored, starting nothing (image.Store.Follow).
	Follow(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error)
	// CreateTemp creates a file to spool an archive to Import in, where
	// a crash leaves nothing for long: the store empties the directory
	// when it opens.
	CreateTemp(pattern string) (*os.File, error)
}

// Images is the image service over an image store: list, pull, build,
// import and remove images, in the API's view. It is safe for concurrent
// use.
type Images struct {
	store    ImageStore
	builtins []string
	pins     func(ctx context.Context, ref string) ([]string, error)
}

// ImagesOption configures Images.
type ImagesOption func(*Images)

// WithBuiltins has List show the built-in images refs (normalized
// references) that are not stored as missing: where sandboxes run on this
// host's image store, those are the images that can be built here.
func WithBuiltins(refs ...string) ImagesOption {
	return func(i *Images) { i.builtins = refs }
}

// WithPins has Remove refuse an image that pins(ref) names anything for:
// the snapshots whose restores need its layers.
func WithPins(pins func(ctx context.Context, ref string) ([]string, error)) ImagesOption {
	return func(i *Images) { i.pins = pins }
}

// NewImages returns the image service of st.
func NewImages(st ImageStore, opts ...ImagesOption) *Images {
	i := &Images{store: st}
	for _, o := range opts {
		o(i)
	}
	return i
}

// CreateTemp creates a file for an archive on its way to Import, in the
// store's spool directory (see ImageStore.CreateTemp); the caller removes
// it.
func (i *Images) CreateTemp(pattern string) (*os.File, error) { return i.store.CreateTemp(pattern) }

// ImageOp runs a checked image operation, passing its progress to
// progress (which may be nil) as it goes, and returns the images it
// stored. progress is called from one goroutine at a time.
type ImageOp func(ctx context.Context, progress func(api.ImageProgress)) ([]api.Image, error)

func imageView(img *image.Image) api.Image {
	return api.Image{Ref: img.Ref, Digest: img.Digest, ID: img.ID, Size: img.Size, Layers: len(img.Layers), Created: img.Created,
		Status: api.ImageReady}
}

// imageViews returns the views of imgs; never nil.
func imageViews(imgs []*image.Image) []api.Image {
	out := make([]api.Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, imageView(img))
	}
	return out
}

// List returns every stored image, every image being pulled or built
// with its progress, those whose last pull or build failed, and the
// built-in images (WithBuiltins) not built yet, ordered by reference;
// never nil.
func (s *Images) List(ctx context.Context) ([]api.Image, error) {
	imgs, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := imageViews(imgs)
	at := make(map[string]int, len(out))
	for i, img := range out {
		at[img.Ref] = i
	}
	add := func(ref string) *api.Image {
		i, ok := at[ref]
		if !ok {
			i = len(out)
			at[ref] = i
			out = append(out, api.Image{Ref: ref})
		}
		return &out[i]
	}
	for _, op := range s.store.Operations() {
		img := add(op.Ref)
		started := op.Started
		img.Started = &started
		if op.Progress != (image.Progress{}) {
			img.Progress = &api.ImageProgress{Phase: op.Progress.Phase, Item: op.Progress.Item,
				Current: op.Progress.Current, Total: op.Progress.Total}
		}
		switch {
		case op.Err != nil:
			img.Status, img.Error = api.ImageFailed, op.Err.Error()
		case op.Build:
			img.Status = api.ImageBuilding
		default:
			img.Status = api.ImagePulling
		}
	}
	for _, ref := range s.builtins {
		if _, ok := at[ref]; !ok {
			add(ref).Status = api.ImageMissing
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// Pull checks ref and returns the operation that pulls it from its
// registry, giving the one image stored.
func (s *Images) Pull(ref string) (ImageOp, error) { return s.one(ref, s.store.Pull) }

// Build checks name and returns the operation that builds that built-in
// image (e.g. "agent2env/python"), giving the one image stored.
func (s *Images) Build(name string) (ImageOp, error) { return s.one(name, s.store.Build) }

// Follow checks ref and returns the operation that follows its pull or
// build in flight (see ImageStore.Follow), giving the image it stored.
// Ref neither stored nor in flight fails the operation with ErrNotFound.
func (s *Images) Follow(ref string) (ImageOp, error) { return s.one(ref, s.store.Follow) }

// one checks ref and returns the operation fn runs on it. A ref that is
// no image reference is refused here, before the operation's stream
// starts, so that it is a 400 and not an error event of a 200.
func (s *Images) one(ref string, fn func(context.Context, string, image.ProgressFunc) (*image.Image, error)) (ImageOp, error) {
	if ref == "" {
		return nil, errdefs.Invalid("ref is required")
	}
	if _, err := image.Normalize(ref); err != nil {
		return nil, err
	}
	return func(ctx context.Context, progress func(api.ImageProgress)) ([]api.Image, error) {
		img, err := fn(ctx, ref, progressFunc(progress))
		if err != nil {
			return nil, err
		}
		return []api.Image{imageView(img)}, nil
	}, nil
}

// Import returns the operation that imports the `docker save` or OCI
// layout tarball at path, on the daemon's host, giving every image it
// holds.
func (s *Images) Import(path string) ImageOp {
	return func(ctx context.Context, progress func(api.ImageProgress)) ([]api.Image, error) {
		imgs, err := s.store.Import(ctx, path, progressFunc(progress))
		if err != nil {
			return nil, err
		}
		return imageViews(imgs), nil
	}
}

// Remove deletes the image ref; an unknown one is ErrNotFound, one that
// snapshots still need (WithPins) a 409 naming them.
func (s *Images) Remove(ctx context.Context, ref string) error {
	if s.pins != nil {
		ids, err := s.pins(ctx, ref)
		if err != nil {
			return fmt.Errorf("remove image %s: %w", ref, err)
		}
		if len(ids) > 0 {
			return errdefs.WithCode(errdefs.Precondition("image %s is needed by snapshots %s (their restores run on its layers): delete them first",
				ref, strings.Join(ids, ", ")), api.CodeConflict)
		}
	}
	return s.store.Remove(ctx, ref)
}

// progressFunc passes the store's progress to p in the API's view.
func progressFunc(p func(api.ImageProgress)) image.ProgressFunc {
	if p == nil {
		return nil
	}
	return func(pr image.Progress) {
		p(api.ImageProgress{Phase: pr.Phase, Item: pr.Item, Current: pr.Current, Total: pr.Total})
	}
}
