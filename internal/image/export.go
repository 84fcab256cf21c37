package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BuiltinOCI returns the built-in image name (as [Store.Build] takes it)
// as an OCI image for a registry, such as one a Kubernetes cluster pulls
// from: its layers are the build cache's tars, uncompressed, built first
// when the cache has none; the image config is the one Build stores.
// Nothing is stored.
func (s *Store) BuiltinOCI(ctx context.Context, name string, p ProgressFunc) (v1.Image, error) {
	_, rc, err := builtinRecipe(name)
	if err != nil {
		return nil, fmt.Errorf("image %s as OCI: %w", name, err)
	}
	tars, err := s.buildLayers(ctx, rc, p)
	if err != nil {
		return nil, fmt.Errorf("image %s as OCI: %w", name, err)
	}
	var adds []mutate.Addendum
	for _, path := range tars {
		diffID, size, err := fileDigest(ctx, path, "hashing "+filepath.Base(path), p)
		if err != nil {
			return nil, fmt.Errorf("image %s as OCI: %w", name, err)
		}
		adds = append(adds, mutate.Addendum{Layer: fileLayer{path: path, diffID: diffID, size: size}, MediaType: types.OCIUncompressedLayer})
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), adds...)
	if err != nil {
		return nil, fmt.Errorf("image %s as OCI: %w", name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s as OCI: %w", name, err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = runtime.GOARCH, "linux", rc.config()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s as OCI: %w", name, err)
	}
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

// fileLayer is an uncompressed layer tar on disk: its digest is its diff
// ID, and it is sent as it is.
type fileLayer struct {
	path   string
	diffID v1.Hash
	size   int64
}

func (l fileLayer) Digest() (v1.Hash, error)             { return l.diffID, nil }
func (l fileLayer) DiffID() (v1.Hash, error)             { return l.diffID, nil }
func (l fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l fileLayer) MediaType() (types.MediaType, error)  { return types.OCIUncompressedLayer, nil }
