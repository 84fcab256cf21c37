package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// newTestStore opens a store in a temp dir with a private cache dir and
// no credentials from the environment.
func newTestStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	base := []Option{
		WithLogger(slog.New(slog.DiscardHandler)),
		WithCacheDir(t.TempDir()),
		WithKeychain(authn.NewMultiKeychain()),
	}
	s, err := Open(filepath.Join(t.TempDir(), "images"), append(base, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// entry is one member of a hand-built layer tar.
type entry struct {
	name   string
	typ    byte // tar.TypeReg when zero
	body   string
	link   string
	mode   int64
	uid    int
	gid    int
	mtime  time.Time
	xattrs map[string]string
}

var testMtime = time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC)

func tarBytes(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Typeflag: e.typ,
			Linkname: e.link,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			ModTime:  e.mtime,
			Format:   tar.FormatPAX,
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.ModTime.IsZero() {
			h.ModTime = testMtime
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		for k, v := range e.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %s: %v", e.name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gzipLayer is a layer whose blob is gzip-compressed.
func gzipLayer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	b := tarBytes(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// plainLayer is a layer whose blob is the tar itself, as docker save
// writes them.
func plainLayer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	return static.NewLayer(tarBytes(t, entries...), types.OCIUncompressedLayer)
}

// testImage makes a linux image for the host architecture.
func testImage(t *testing.T, env string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Config.Env = []string{env}
	cf.Config.Cmd = []string{"/bin/sh"}
	cf.Config.WorkingDir = "/work"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// storeImage commits img under ref the way Import does.
func storeImage(t *testing.T, s *Store, ref string, img v1.Image) *Image {
	t.Helper()
	r, err := parseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := s.commitLocal(context.Background(), img, []reference{r}, nil, nil)
	if err != nil {
		t.Fatalf("store %s: %v", ref, err)
	}
	return imgs[0]
}

// progressLog collects progress events; it is safe for concurrent use.
type progressLog struct {
	mu     sync.Mutex
	events []Progress
}

func (l *progressLog) add(p Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, p)
}

func (l *progressLog) phases() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for _, e := range l.events {
		m[e.Phase]++
	}
	return m
}

// last returns the latest event of phase for item.
func (l *progressLog) last(phase, item string) (Progress, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if e := l.events[i]; e.Phase == phase && e.Item == item {
			return e, true
		}
	}
	return Progress{}, false
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
