package image

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// OCI layout annotations that name an image.
const (
	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationImageName = "io.containerd.image.name" // set by containerd and docker exports
	ociLayoutFile       = "oci-layout"
	dockerManifestFile  = "manifest.json"
)

// Import stores the images in path: a `docker save` tarball (plain or
// gzip-compressed), an OCI image layout directory, or a tar of one. Each
// tag of a docker save image is stored as its own ref. An image that
// carries no name (no repo tag, or an OCI ref.name that is only a tag) is
// stored under its ID. Its errors do not name path, a copy of what a
// client sent in the daemon's own directory.
func (s *Store) Import(ctx context.Context, path string, p ProgressFunc) ([]*Image, error) {
	imgs, err := s.importPath(ctx, path, p)
	if err != nil {
		return nil, fmt.Errorf("import images: %w", err)
	}
	return imgs, nil
}

func (s *Store) importPath(ctx context.Context, path string, p ProgressFunc) ([]*Image, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.NotFound("%s does not exist", path)
	}
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return s.importLayout(ctx, path, p)
	}
	open := fileOpener(path)
	kind, err := tarKind(open)
	if err != nil {
		return nil, err
	}
	switch kind {
	case dockerManifestFile:
		return s.importDockerSave(ctx, open, p)
	case ociLayoutFile:
		dir, err := os.MkdirTemp(s.tmpDir(), "layout-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := extractLayout(ctx, open, dir); err != nil {
			return nil, err
		}
		return s.importLayout(ctx, dir, p)
	default:
		return nil, errdefs.Invalid("the archive is neither a docker save tarball nor an OCI layout")
	}
}

// fileOpener opens path as a tar stream, decompressing it if it is
// gzip-compressed.
func fileOpener(path string) tarball.Opener {
	return func() (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		br := bufio.NewReader(f)
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			zr, err := gzip.NewReader(br)
			if err != nil {
				f.Close()
				return nil, errdefs.Invalid("read gzip: %v", err)
			}
			return readCloser{zr, f}, nil
		}
		return readCloser{br, f}, nil
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// tarKind tells a docker save tarball (it has manifest.json) from a tar
// of an OCI layout (oci-layout only). Docker 25 and later write both;
// manifest.json has the repo tags, so it wins.
func tarKind(open tarball.Opener) (string, error) {
	rc, err := open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	kind := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return kind, nil
		}
		if err != nil {
			return "", errdefs.Invalid("read tar: %v", err)
		}
		switch path.Clean(hdr.Name) {
		case dockerManifestFile:
			return dockerManifestFile, nil
		case ociLayoutFile:
			kind = ociLayoutFile
		}
	}
}

func (s *Store) importDockerSave(ctx context.Context, open tarball.Opener, p ProgressFunc) ([]*Image, error) {
	m, err := tarball.LoadManifest(open)
	if err != nil {
		return nil, errdefs.Invalid("read docker save manifest: %v", err)
	}
	var out []*Image
	for i, d := range m {
		var refs []reference
		var tag *name.Tag
		for _, t := range d.RepoTags {
			r, err := parseRef(t)
			if err != nil {
				return nil, err
			}
			refs = append(refs, r)
			if tag == nil {
				nt, err := name.NewTag(t)
				if err != nil {
					return nil, errdefs.Invalid("repo tag %q: %v", t, err)
				}
				tag = &nt
			}
		}
		if tag == nil && len(m) > 1 {
			return nil, errdefs.Invalid("image %d of %d (%s) has no repo tag; only a tarball of one image may be untagged", i+1, len(m), d.Config)
		}
		img, err := tarball.Image(open, tag)
		if err != nil {
			return nil, errdefs.Invalid("read image %s: %v", d.Config, err)
		}
		imgs, err := s.commitLocal(ctx, img, refs, nil, p)
		if err != nil {
			return nil, err
		}
		out = append(out, imgs...)
	}
	return out, nil
}

func (s *Store) importLayout(ctx context.Context, dir string, p ProgressFunc) ([]*Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			// Its path is in the daemon's directory: the file's name says
			// enough.
			return nil, errdefs.Invalid("read OCI layout: %s %s: %v", pe.Op, filepath.Base(pe.Path), pe.Err)
		}
		return nil, errdefs.Invalid("read OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, errdefs.Invalid("read OCI layout index: %v", err)
	}
	var out []*Image
	for _, d := range im.Manifests {
		img, err := s.layoutImage(idx, d)
		if err != nil {
			return nil, err
		}
		if img == nil {
			s.log.Debug("skip OCI layout entry", "digest", d.Digest.String(), "mediaType", string(d.MediaType))
			continue
		}
		var refs []reference
		if n := layoutName(d.Annotations); n != "" {
			r, err := parseRef(n)
			if err != nil {
				return nil, err
			}
			refs = append(refs, r)
		}
		manifest, err := img.RawManifest()
		if err != nil {
			return nil, err
		}
		imgs, err := s.commitLocal(ctx, img, refs, manifest, p)
		if err != nil {
			return nil, err
		}
		out = append(out, imgs...)
	}
	if len(out) == 0 {
		return nil, errdefs.Invalid("OCI layout %s has no image for %s", dir, s.platform)
	}
	return out, nil
}

// layoutImage returns the image d describes, resolving an index to the
// store's platform, or nil if d is neither.
func (s *Store) layoutImage(idx v1.ImageIndex, d v1.Descriptor) (v1.Image, error) {
	switch {
	case d.MediaType.IsImage():
		if d.Platform != nil && !d.Platform.Satisfies(s.platform) {
			return nil, nil
		}
		return idx.Image(d.Digest)
	case d.MediaType.IsIndex():
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		cm, err := child.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, c := range cm.Manifests {
			if c.MediaType.IsImage() && c.Platform != nil && c.Platform.Satisfies(s.platform) {
				return child.Image(c.Digest)
			}
		}
	}
	return nil, nil
}

// layoutName returns the full reference an OCI layout gives an image, or
// "" if it gives none. A ref.name that is only a tag ("3.12") names no
// repository.
func layoutName(ann map[string]string) string {
	if n := ann[annotationImageName]; n != "" {
		return n
	}
	if n := ann[annotationRefName]; strings.ContainsAny(n, "/:@") {
		return n
	}
	return ""
}

// commitLocal stores an image read from a local file. Layers are read
// uncompressed; with no refs the image is stored under its ID.
func (s *Store) commitLocal(ctx context.Context, img v1.Image, refs []reference, manifest []byte, p ProgressFunc) ([]*Image, error) {
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, errdefs.Invalid("read image config: %v", err)
	}
	if len(refs) == 0 {
		refs = []reference{{key: digestOf(config), local: true}}
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, errdefs.Invalid("read image layers: %v", err)
	}
	src := source{refs: refs, config: config, manifest: manifest}
	for _, l := range layers {
		src.layers = append(src.layers, layerSource{open: l.Uncompressed})
	}
	return s.commit(ctx, src, p)
}

// extractLayout unpacks a tar of an OCI layout into dir. It takes regular
// files and directories only, which is all a layout has, and os.Root keeps
// every write inside dir.
func extractLayout(ctx context.Context, open tarball.Opener, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errdefs.Invalid("read OCI layout tar: %v", err)
		}
		rel, err := cleanName(hdr.Name)
		if err != nil || rel == "" {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(rel, 0o755)
		case tar.TypeReg:
			err = extractFile(root, rel, tr)
		}
		if err != nil {
			return fmt.Errorf("extract %s: %w", hdr.Name, err)
		}
	}
}

func extractFile(root *os.Root, rel string, r io.Reader) error {
	if d := path.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(rel, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
