package service

import (
	"context"
	"os"

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
	// CreateTemp creates a file to spool an archive to Import in, where
	// a crash leaves nothing for long: the store empties the directory
	// when it opens.
	CreateTemp(pattern string) (*os.File, error)
}

// Images is the image service over an image store: list, pull, build,
// import and remove images, in the API's view. It is safe for concurrent
// use.
type Images struct {
	store ImageStore
}

// NewImages returns the image service of st.
func NewImages(st ImageStore) *Images { return &Images{store: st} }

// CreateTemp creates a file for an archive on its way to Import, in the
// store's spool directory (see ImageStore.CreateTemp); the caller removes
// it.
func (i *Images) CreateTemp(pattern string) (*os.File, error) { return i.store.CreateTemp(pattern) }

// ImageOp runs a checked image operation, passing its progress to
// progress (which may be nil) as it goes, and returns the images it
// stored. progress is called from one goroutine at a time.
type ImageOp func(ctx context.Context, progress func(api.ImageProgress)) ([]api.Image, error)

func imageView(img *image.Image) api.Image {
	return api.Image{Ref: img.Ref, Digest: img.Digest, ID: img.ID, Size: img.Size, Layers: len(img.Layers), Created: img.Created}
}

// imageViews returns the views of imgs; never nil.
func imageViews(imgs []*image.Image) []api.Image {
	out := make([]api.Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, imageView(img))
	}
	return out
}

// List returns every stored image; never nil.
func (s *Images) List(ctx context.Context) ([]api.Image, error) {
	imgs, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	return imageViews(imgs), nil
}

// Pull checks ref and returns the operation that pulls it from its
// registry, giving the one image stored.
func (s *Images) Pull(ref string) (ImageOp, error) { return s.one(ref, s.store.Pull) }

// Build checks name and returns the operation that builds that built-in
// image (e.g. "agent2env/python"), giving the one image stored.
func (s *Images) Build(name string) (ImageOp, error) { return s.one(name, s.store.Build) }

// one checks ref and returns the operation fn runs on it.
func (s *Images) one(ref string, fn func(context.Context, string, image.ProgressFunc) (*image.Image, error)) (ImageOp, error) {
	if ref == "" {
		return nil, errdefs.Invalid("ref is required")
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

// Remove deletes the image ref; an unknown one is ErrNotFound.
func (s *Images) Remove(ctx context.Context, ref string) error { return s.store.Remove(ctx, ref) }

// progressFunc passes the store's progress to p in the API's view.
func progressFunc(p func(api.ImageProgress)) image.ProgressFunc {
	if p == nil {
		return nil
	}
	return func(pr image.Progress) {
		p(api.ImageProgress{Phase: pr.Phase, Item: pr.Item, Current: pr.Current, Total: pr.Total})
	}
}
