package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// source is an image on its way into the store, whatever it came from.
type source struct {
	refs   []reference
	config []byte // raw image config
	// manifest is the raw manifest, or nil for sources that have none (a
	// docker save tarball, a build): commit then records the digest of an
	// OCI manifest with the layers uncompressed.
	manifest []byte
	layers   []layerSource // one per DiffID in config, lowest first
}

// layerSource is where a layer's content comes from.
type layerSource struct {
	// remote, when set, is a registry layer: its compressed blob is
	// downloaded and verified before it is unpacked.
	remote v1.Layer
	// open otherwise returns the uncompressed layer tar, of size bytes
	// when size is not zero (the unpack's progress then has a total).
	open func() (io.ReadCloser, error)
	size int64
}

// maxParallelLayers bounds the layers of one image fetched and unpacked at
// the same time.
const maxParallelLayers = 3

// commit stores src: it unpacks the layers that are not present yet,
// writes the manifest and config blobs and records the image under each
// of src.refs.
func (s *Store) commit(ctx context.Context, src source, p ProgressFunc) ([]*Image, error) {
	cfg, err := v1.ParseConfigFile(bytes.NewReader(src.config))
	if err != nil {
		return nil, errdefs.Invalid("parse image config: %v", err)
	}
	if (cfg.OS != "" && cfg.OS != s.platform.OS) || (cfg.Architecture != "" && cfg.Architecture != s.platform.Architecture) {
		return nil, errdefs.Invalid("image is for %s/%s, not %s", cfg.OS, cfg.Architecture, s.platform)
	}
	diffIDs := cfg.RootFS.DiffIDs
	if len(diffIDs) != len(src.layers) {
		return nil, errdefs.Invalid("image config lists %d layers, the image has %d", len(diffIDs), len(src.layers))
	}
	configDigest := digestOf(src.config)
	if src.manifest != nil {
		m, err := v1.ParseManifest(bytes.NewReader(src.manifest))
		if err != nil {
			return nil, errdefs.Invalid("parse manifest: %v", err)
		}
		if m.Config.Digest.String() != configDigest {
			return nil, errdefs.Invalid("config digest %s does not match manifest (%s)", configDigest, m.Config.Digest)
		}
		if len(m.Layers) != len(diffIDs) {
			return nil, errdefs.Invalid("manifest lists %d layers, the config %d", len(m.Layers), len(diffIDs))
		}
	}
	keys := []string{configDigest}
	for _, d := range diffIDs {
		keys = append(keys, d.String())
	}
	s.lease(keys...)
	defer s.release(keys...)

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelLayers)
	for i, d := range diffIDs {
		g.Go(func() error { return s.ensureLayer(gctx, d, src.layers[i], p) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	manifest := src.manifest
	if manifest == nil {
		if manifest, err = s.uncompressedManifest(src.config, configDigest, diffIDs); err != nil {
			return nil, err
		}
	}
	manifestDigest := digestOf(manifest)
	s.lease(manifestDigest)
	defer s.release(manifestDigest)
	if err := s.writeBlob(configDigest, src.config); err != nil {
		return nil, err
	}
	if err := s.writeBlob(manifestDigest, manifest); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rec := imageRecord{
		Digest: manifestDigest,
		ID:     configDigest,
		Config: Config{
			Env:        cfg.Config.Env,
			Entrypoint: cfg.Config.Entrypoint,
			Cmd:        cfg.Config.Cmd,
			WorkingDir: cfg.Config.WorkingDir,
			User:       cfg.Config.User,
		},
		Created: time.Now().UTC(),
	}
	for _, d := range diffIDs {
		rec.Layers = append(rec.Layers, d.String())
	}
	s.mu.Lock()
	imgs := make([]*Image, 0, len(src.refs))
	for _, r := range src.refs {
		rec := rec
		if old, ok := s.idx.Images[r.key]; ok && old.Digest == rec.Digest {
			rec.Created = old.Created
		}
		s.idx.Images[r.key] = &rec
		imgs = append(imgs, s.imageLocked(r.key, &rec))
	}
	err = s.saveLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, img := range imgs {
		s.log.Info("stored image", logRef, img.Ref, "digest", img.Digest, "layers", len(img.Layers))
		report(p, Progress{Phase: PhaseDone, Item: img.Ref})
	}
	return imgs, nil
}

// uncompressedManifest makes the OCI manifest of an image whose layers are
// stored as plain tars, for sources that come without a manifest.
func (s *Store) uncompressedManifest(config []byte, configDigest string, diffIDs []v1.Hash) ([]byte, error) {
	cd, err := v1.NewHash(configDigest)
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(config)), Digest: cd},
	}
	s.mu.Lock()
	for _, d := range diffIDs {
		m.Layers = append(m.Layers, v1.Descriptor{
			MediaType: types.OCIUncompressedLayer,
			Size:      s.idx.Layers[d.String()].TarSize,
			Digest:    d,
		})
	}
	s.mu.Unlock()
	return json.Marshal(m)
}

// ensureLayer makes sure layer diffID is unpacked, sharing the work with
// any other image that is unpacking it right now.
func (s *Store) ensureLayer(ctx context.Context, diffID v1.Hash, ls layerSource, p ProgressFunc) error {
	if s.hasLayer(diffID) {
		return nil
	}
	_, err := s.layerOps.do(ctx, diffID.String(), p, func(ctx context.Context, p ProgressFunc) (struct{}, error) {
		if s.hasLayer(diffID) {
			return struct{}{}, nil
		}
		return struct{}{}, s.fetchLayer(ctx, diffID, ls, p)
	})
	return err
}

func (s *Store) hasLayer(diffID v1.Hash) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.idx.Layers[diffID.String()]
	return ok
}

// fetchLayer downloads (for registry layers) and unpacks one layer into a
// temporary directory, checks its DiffID and only then renames it into
// place, so a layer directory that exists is complete.
func (s *Store) fetchLayer(ctx context.Context, diffID v1.Hash, ls layerSource, p ProgressFunc) error {
	item := diffID.String()
	var src io.Reader
	if ls.remote != nil {
		d, err := ls.remote.Digest()
		if err != nil {
			return fmt.Errorf("layer %s: %w", diffID, err)
		}
		item = d.String()
		blob, err := s.download(ctx, ls.remote, item, p)
		if err != nil {
			return err
		}
		defer os.Remove(blob)
		f, err := os.Open(blob)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		// Unpack progress counts compressed bytes, whose total is known.
		rc, err := decompress(newProgressReader(ctx, f, PhaseUnpack, item, st.Size(), p))
		if err != nil {
			return fmt.Errorf("layer %s: %w", item, err)
		}
		defer rc.Close()
		src = rc
	} else {
		rc, err := ls.open()
		if err != nil {
			return fmt.Errorf("open layer %s: %w", item, err)
		}
		defer rc.Close()
		src = newProgressReader(ctx, rc, PhaseUnpack, item, ls.size, p)
	}

	dir, err := os.MkdirTemp(s.tmpDir(), "unpack-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(src, h)}
	start := time.Now()
	size, err := unpack(ctx, counted, dir, s.log)
	if err != nil {
		return fmt.Errorf("unpack layer %s: %w", item, err)
	}
	// The DiffID covers the whole tar stream, padding included.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return fmt.Errorf("read layer %s: %w", item, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID.String() {
		return errdefs.Invalid("layer %s: content has diff id %s, want %s", item, got, diffID)
	}
	// The rename must not reach the disk before the files do.
	if err := syncFS(dir); err != nil {
		return err
	}
	s.mu.Lock()
	err = os.Rename(dir, s.layerDir(diffID.String()))
	if err == nil {
		s.idx.Layers[diffID.String()] = layerRecord{Size: size, TarSize: counted.n}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("store layer %s: %w", diffID, err)
	}
	done = true
	s.log.Debug("unpacked layer", logLayer, diffID.String(), "bytes", size, "took", time.Since(start))
	return nil
}

// download fetches a registry layer's compressed blob into the store's
// tmp dir, verifying its digest, and returns the file's path.
func (s *Store) download(ctx context.Context, l v1.Layer, item string, p ProgressFunc) (string, error) {
	want, err := l.Digest()
	if err != nil {
		return "", err
	}
	size, err := l.Size()
	if err != nil {
		return "", err
	}
	rc, err := l.Compressed()
	if err != nil {
		return "", fmt.Errorf("download layer %s: %w", item, classify(err))
	}
	defer rc.Close()
	f, err := os.CreateTemp(s.tmpDir(), "blob-")
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		f.Close()
		if !ok {
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), newProgressReader(ctx, rc, PhaseDownload, item, size, p))
	if err != nil {
		return "", fmt.Errorf("download layer %s: %w", item, classify(err))
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != want.String() || n != size {
		return "", errdefs.Invalid("layer %s: downloaded %d bytes with digest %s, want %d bytes with digest %s", item, n, got, size, want)
	}
	ok = true
	return f.Name(), nil
}

// decompress returns the tar stream inside r, which may be gzip or zstd
// compressed or not at all: registries label media types loosely.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		return gzip.NewReader(br)
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	default:
		return io.NopCloser(br), nil
	}
}

// writeBlob stores data under its digest, after checking it has it.
func (s *Store) writeBlob(digest string, data []byte) error {
	if got := digestOf(data); got != digest {
		return errdefs.Invalid("blob has digest %s, want %s", got, digest)
	}
	path := s.blobPath(digest)
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeFileAtomic(path, s.tmpDir(), data); err != nil {
		return fmt.Errorf("write blob %s: %w", digest, err)
	}
	return nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// syncFS flushes the file system that holds dir.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// progressReader reports the bytes read through it, at most every
// progressInterval and once at the end, and stops reading when ctx is
// done.
type progressReader struct {
	ctx   context.Context
	r     io.Reader
	ev    Progress
	p     ProgressFunc
	last  time.Time
	ended bool
}

const progressInterval = 100 * time.Millisecond

func newProgressReader(ctx context.Context, r io.Reader, phase, item string, total int64, p ProgressFunc) *progressReader {
	pr := &progressReader{ctx: ctx, r: r, p: p, ev: Progress{Phase: phase, Item: item, Total: total}}
	report(p, pr.ev)
	pr.last = time.Now()
	return pr
}

func (pr *progressReader) Read(b []byte) (int, error) {
	if err := pr.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := pr.r.Read(b)
	pr.ev.Current += int64(n)
	if errors.Is(err, io.EOF) && !pr.ended {
		pr.ended = true
		report(pr.p, pr.ev)
	} else if now := time.Now(); now.Sub(pr.last) >= progressInterval {
		pr.last = now
		report(pr.p, pr.ev)
	}
	return n, err
}
