package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// BuiltinOCI returns the built-in image name (as [Store.Build] takes it)
// as an OCI image for a registry, such as one a Kubernetes cluster pulls
// from: its layers are the build cache's tars (built first when the cache
// has none) compressed with zstd, kept in the cache dir as well (and
// the copies of other versions' layers pruned: see [Store.pruneZstd]);
// the image config is the one Build stores. Nothing is stored in s.
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
	if err := s.pruneZstd(time.Now()); err != nil {
		s.log.Warn("prune compressed layers of other versions", logPath, s.cacheDir, "err", err)
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
	// Its time is when it was last used, which pruneZstd reads.
	now := time.Now()
	if err := os.Chtimes(zst, now, now); err != nil {
		s.log.Debug("cannot mark the compressed layer used", logPath, zst, "err", err)
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

// zstdGrace is how long pruneZstd keeps the compressed copy of a layer
// that is not the current version's after it was last used: another
// checkout on the machine, with other recipes, may be pushing it.
const zstdGrace = time.Hour

// zstdSuffix ends the name of a compressed copy of a layer tar in the
// cache dir; its build lock and its partial file (compressFile's) have
// more after it.
const zstdSuffix = ".tar.zst"

// currentZstd returns the names in the cache dir of the compressed copies
// of the built-in recipes' layers, as this version has them: each is
// keyed, as its tar is, by the hash of what makes it.
func currentZstd() map[string]bool {
	names := map[string]bool{}
	for _, rc := range recipes {
		names[rc.hash()+zstdSuffix] = true
		if rc.npm != nil {
			names[rc.npm.hash()+".npm"+zstdSuffix] = true
		}
	}
	return names
}

// pruneZstd removes from the cache dir the compressed copies of layers
// that are not the current version's (other recipes', made by earlier
// versions of agent2env), with their build locks and partial files: each
// is as large as its layer compressed (hundreds of MB) and nothing else
// ever removes it. It leaves one being made (its lock held) or used (its
// time, which zstdLayer sets, or a partial file's) since now-zstdGrace.
// The layer tars themselves are the build cache's, and stay.
func (s *Store) pruneZstd(now time.Time) error {
	entries, err := os.ReadDir(s.cacheDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	current := currentZstd()
	stale := map[string][]string{} // copy → its files in the cache dir
	for _, e := range entries {
		i := strings.Index(e.Name(), zstdSuffix)
		if i < 0 {
			continue
		}
		zst, rest := e.Name()[:i+len(zstdSuffix)], e.Name()[i+len(zstdSuffix):]
		if current[zst] || (rest != "" && rest != ".lock" && !strings.HasPrefix(rest, ".tmp")) {
			continue
		}
		stale[zst] = append(stale[zst], e.Name())
	}
	var errs []error
	for _, zst := range slices.Sorted(maps.Keys(stale)) {
		errs = append(errs, s.removeZstd(zst, stale[zst], now))
	}
	return errors.Join(errs...)
}

// removeZstd removes files, the compressed copy zst's, unless the copy is
// being made or was used since now-zstdGrace.
func (s *Store) removeZstd(zst string, files []string, now time.Time) error {
	lockPath := filepath.Join(s.cacheDir, zst+".lock")
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return nil // being made
	} else if err != nil {
		return fmt.Errorf("lock %s: %w", lockPath, err)
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(s.cacheDir, f))
		if err == nil && f != zst+".lock" && fi.ModTime().After(now.Add(-zstdGrace)) {
			return nil // in use
		}
	}
	// The lock goes last, while held: a build of the copy that starts
	// meanwhile waits, then makes it anew.
	var errs []error
	for _, f := range append(slices.DeleteFunc(files, func(f string) bool { return f == zst+".lock" }), zst+".lock") {
		if err := os.Remove(filepath.Join(s.cacheDir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		s.log.Info("removed the compressed layer of another version", logPath, filepath.Join(s.cacheDir, zst))
	}
	return errors.Join(errs...)
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
