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
	"github.com/klauspost/compress/zstd"
)

// BuiltinOCI returns the built-in image name (as [Store.Build] takes it)
// as an OCI image for a registry, such as one a Kubernetes cluster pulls
// from: its layers are the build cache's tars (built first when the cache
// has none) compressed with zstd, kept in the cache dir as well; the
// image config is the one Build stores. Nothing is stored in s.
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
		l, err := s.zstdLayer(ctx, path, p)
		if err != nil {
			return nil, fmt.Errorf("image %s as OCI: %w", name, err)
		}
		adds = append(adds, mutate.Addendum{Layer: l, MediaType: types.OCILayerZStd})
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

// zstdLayer returns the layer of the tar path, compressed with zstd into
// the cache dir next to it (once: later calls reuse the file).
func (s *Store) zstdLayer(ctx context.Context, path string, p ProgressFunc) (fileLayer, error) {
	zst := path + ".zst"
	err := s.cached(ctx, zst, "compressed "+filepath.Base(path), p, func(*os.File) error { return compressFile(path, zst) })
	if err != nil {
		return fileLayer{}, err
	}
	l := fileLayer{tar: path, zst: zst}
	if l.diffID, _, err = fileDigest(ctx, path, "hashing "+filepath.Base(path), p); err != nil {
		return fileLayer{}, err
	}
	if l.digest, l.size, err = fileDigest(ctx, zst, "hashing "+filepath.Base(zst), p); err != nil {
		return fileLayer{}, err
	}
	return l, nil
}

// compressFile writes src compressed with zstd to dst, by way of a
// temporary file beside it.
func compressFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	zw, err := zstd.NewWriter(tmp, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	if _, err := io.Copy(zw, in); err != nil {
		zw.Close()
		return fmt.Errorf("compress %s: %w", src, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", src, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// fileLayer is a layer on disk: its tar and the tar compressed with
// zstd, which is what a registry is sent.
type fileLayer struct {
	tar, zst       string
	diffID, digest v1.Hash
	size           int64 // of zst
}

func (l fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l fileLayer) DiffID() (v1.Hash, error)             { return l.diffID, nil }
func (l fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.zst) }
func (l fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.tar) }
func (l fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l fileLayer) MediaType() (types.MediaType, error)  { return types.OCILayerZStd, nil }
