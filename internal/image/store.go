package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Log attribute keys.
const (
	logRef   = "ref"
	logLayer = "layer"
	logPath  = "path"
)

// DefaultCacheDir is where built-in image builds are cached when neither
// WithCacheDir nor the AGENT2ENV_CACHE_DIR environment variable says
// otherwise.
const DefaultCacheDir = "/var/cache/agent2env"

const indexVersion = 1

// Store is a content-addressed image store rooted in one directory. It is
// safe for concurrent use. At most one Store may be open on a root at a
// time: Open discards the work in flight it finds there.
type Store struct {
	root     string
	cacheDir string
	mirror   string
	log      *slog.Logger
	keychain *keychain
	insecure map[string]bool
	platform v1.Platform

	// ops shares concurrent Ensure/Pull/Build of one ref; layerOps shares
	// the unpacking of one layer between images that have it.
	ops      group[*Image]
	layerOps group[struct{}]

	mu sync.Mutex // guards the fields below and the files they describe
	// idx is the in-memory index.json. Layer records also exist for
	// layers unpacked by operations still in flight, until the next save.
	idx *index
	// leases count in-flight operations per layer DiffID or blob digest;
	// garbage collection leaves leased content alone.
	leases map[string]int
	// failed holds the last failure of the pull or build of each ref,
	// until one succeeds (see Operations).
	failed map[string]failure
}

// Option configures a Store.
type Option func(*Store)

// WithCacheDir sets where built-in image builds are cached. The cache is
// meant to be shared by stores in different roots: a build is reused by
// every store whose recipe hash matches.
func WithCacheDir(dir string) Option { return func(s *Store) { s.cacheDir = dir } }

// WithLogger sets the logger. The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithMirror sets the Debian mirror builds use. By default mmdebstrap
// picks its own (deb.debian.org, with the updates and security suites).
func WithMirror(url string) Option { return func(s *Store) { s.mirror = url } }

// WithKeychain sets where registry credentials come from when WithAuth
// names none for a registry. The default is authn.DefaultKeychain (the
// Docker config file and its credential helpers).
func WithKeychain(kc authn.Keychain) Option { return func(s *Store) { s.keychain.fallback = kc } }

// WithAuth sets the credentials for one registry host ("docker.io",
// "ghcr.io", "127.0.0.1:5000"), e.g. &authn.Basic{...} or
// authn.FromConfig(authn.AuthConfig{RegistryToken: ...}). Bearer token
// exchange is done by the registry client.
func WithAuth(registry string, a authn.Authenticator) Option {
	return func(s *Store) { s.keychain.static[registryKey(registry)] = a }
}

// WithInsecureRegistries lets the given registry hosts be reached over
// plain HTTP. Loopback and private addresses always may.
func WithInsecureRegistries(hosts ...string) Option {
	return func(s *Store) {
		for _, h := range hosts {
			s.insecure[h] = true
		}
	}
}

// index is the content of index.json.
type index struct {
	Version int                     `json:"version"`
	Images  map[string]*imageRecord `json:"images"`
	Layers  map[string]layerRecord  `json:"layers"`
}

type imageRecord struct {
	Digest  string    `json:"digest"`
	ID      string    `json:"id"`
	Layers  []string  `json:"layers"` // DiffIDs, lowest first
	Config  Config    `json:"config"`
	Created time.Time `json:"created"`
}

type layerRecord struct {
	Size    int64 `json:"size"`    // bytes in regular files
	TarSize int64 `json:"tarSize"` // bytes of the uncompressed layer tar
}

// Open opens the store in root, creating it if needed. It finishes what a
// crash left behind: work in flight is discarded, and content no image
// refers to is removed.
func Open(root string, opts ...Option) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", root, err)
	}
	s := &Store{
		root:     abs,
		cacheDir: DefaultCacheDir,
		log:      slog.Default(),
		keychain: &keychain{static: map[string]authn.Authenticator{}, fallback: authn.DefaultKeychain},
		insecure: map[string]bool{},
		platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		leases:   map[string]int{},
	}
	if d := os.Getenv("AGENT2ENV_CACHE_DIR"); d != "" {
		s.cacheDir = d
	}
	for _, o := range opts {
		o(s)
	}
	if err := s.open(); err != nil {
		return nil, fmt.Errorf("open image store %s: %w", abs, err)
	}
	return s, nil
}

func (s *Store) open() error {
	if err := os.RemoveAll(s.tmpDir()); err != nil {
		return fmt.Errorf("clear tmp: %w", err)
	}
	for _, d := range []string{s.tmpDir(), filepath.Join(s.root, "blobs", "sha256"), filepath.Join(s.root, "layers", "sha256")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	idx := &index{Version: indexVersion, Images: map[string]*imageRecord{}, Layers: map[string]layerRecord{}}
	b, err := os.ReadFile(filepath.Join(s.root, "index.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, idx); err != nil {
			return fmt.Errorf("read index.json: %w", err)
		}
		if idx.Version != indexVersion {
			return errdefs.Precondition("index.json has version %d, want %d", idx.Version, indexVersion)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx = idx
	// Records and directories must agree: an image whose layer is gone
	// is dropped, and a layer dir without a record (a crash between
	// unpack and commit) is garbage.
	for ref, rec := range idx.Images {
		for _, l := range rec.Layers {
			_, recorded := idx.Layers[l]
			if _, err := os.Stat(s.layerDir(l)); err != nil || !recorded {
				s.log.Warn("drop image with missing layer", logRef, ref, logLayer, l)
				delete(idx.Images, ref)
				break
			}
		}
	}
	trash, err := s.collectLocked(true)
	if err != nil {
		return err
	}
	return s.removeAll(trash)
}

// Get returns the image stored under ref, in short ("python:3.12") or
// normalized form, or an ID. It fails with errdefs.ErrNotFound if there
// is none.
func (s *Store) Get(ctx context.Context, ref string) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("get image %s: %w", ref, err)
	}
	return s.get(r)
}

func (s *Store) get(r reference) (*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.idx.Images[r.key]; ok {
		return s.imageLocked(r.key, rec), nil
	}
	if idPattern.MatchString(r.key) {
		refs := make([]string, 0, 1)
		for ref, rec := range s.idx.Images {
			if rec.ID == r.key {
				refs = append(refs, ref)
			}
		}
		if len(refs) > 0 {
			sort.Strings(refs)
			return s.imageLocked(refs[0], s.idx.Images[refs[0]]), nil
		}
	}
	return nil, errdefs.NotFound("image %s not found", r.key)
}

// List returns every stored image, ordered by ref.
func (s *Store) List(ctx context.Context) ([]*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Image, 0, len(s.idx.Images))
	for ref, rec := range s.idx.Images {
		out = append(out, s.imageLocked(ref, rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// Remove removes the image stored under ref, and the layers and blobs
// that no other image uses. The caller must make sure no sandbox still
// runs on those layers.
func (s *Store) Remove(ctx context.Context, ref string) error {
	r, err := parseRef(ref)
	if err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	s.mu.Lock()
	if _, ok := s.idx.Images[r.key]; !ok {
		s.mu.Unlock()
		return fmt.Errorf("remove image %s: %w", r.key, errdefs.NotFound("image %s not found", r.key))
	}
	delete(s.idx.Images, r.key)
	trash, err := s.collectLocked(false)
	s.mu.Unlock()
	// Files moved out of the store are harmless leftovers if deleting
	// them fails; Open clears them.
	if rmErr := s.removeAll(trash); err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("remove image %s: %w", r.key, err)
	}
	s.log.Info("removed image", logRef, r.key)
	return nil
}

// imageLocked builds the caller's copy of a record.
func (s *Store) imageLocked(ref string, rec *imageRecord) *Image {
	layers := dedupLayers(rec.Layers)
	img := &Image{
		Ref:     ref,
		Digest:  rec.Digest,
		ID:      rec.ID,
		Layers:  make([]string, len(layers)),
		Config:  cloneConfig(rec.Config),
		Created: rec.Created,
	}
	for i, l := range layers {
		img.Layers[i] = s.layerDir(l)
		img.Size += s.idx.Layers[l].Size
	}
	return img
}

// dedupLayers drops every occurrence of a layer but the topmost: overlayfs
// refuses a lowerdir given twice, and a layer applied again on top hides
// everything its lower copy provides, so the view does not change. Old
// images repeat the empty layer.
func dedupLayers(layers []string) []string {
	seen := make(map[string]bool, len(layers))
	out := make([]string, 0, len(layers))
	for i := len(layers) - 1; i >= 0; i-- {
		if !seen[layers[i]] {
			seen[layers[i]] = true
			out = append(out, layers[i])
		}
	}
	slices.Reverse(out)
	return out
}

func cloneConfig(c Config) Config {
	c.Env = append([]string(nil), c.Env...)
	c.Entrypoint = append([]string(nil), c.Entrypoint...)
	c.Cmd = append([]string(nil), c.Cmd...)
	return c
}

// collectLocked removes the records of layers and blobs that no image
// refers to and no operation in flight holds, and moves their files out
// of the store. It returns what the caller must delete once it has let go
// of s.mu: deleting a big tree takes a while. With all, it also sweeps
// layer directories that have no record, which only Open may do.
func (s *Store) collectLocked(all bool) ([]string, error) {
	usedLayers := map[string]bool{}
	usedBlobs := map[string]bool{}
	for _, rec := range s.idx.Images {
		usedBlobs[rec.Digest] = true
		usedBlobs[rec.ID] = true
		for _, l := range rec.Layers {
			usedLayers[l] = true
		}
	}
	var trash []string
	for l := range s.idx.Layers {
		if usedLayers[l] || s.leases[l] > 0 {
			continue
		}
		delete(s.idx.Layers, l)
		// Renamed away under the lock so that a new unpack of the same
		// layer never meets a half-deleted directory.
		t, err := os.MkdirTemp(s.tmpDir(), "rm-")
		if err != nil {
			return trash, err
		}
		trash = append(trash, t)
		if err := os.Rename(s.layerDir(l), filepath.Join(t, "layer")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return trash, fmt.Errorf("remove layer %s: %w", l, err)
		}
		s.log.Debug("removed layer", logLayer, l)
	}
	if all {
		dirs, err := os.ReadDir(filepath.Join(s.root, "layers", "sha256"))
		if err != nil {
			return trash, err
		}
		for _, d := range dirs {
			if _, ok := s.idx.Layers["sha256:"+d.Name()]; !ok {
				trash = append(trash, filepath.Join(s.root, "layers", "sha256", d.Name()))
			}
		}
	}
	blobs, err := os.ReadDir(filepath.Join(s.root, "blobs", "sha256"))
	if err != nil {
		return trash, err
	}
	for _, b := range blobs {
		d := "sha256:" + b.Name()
		if !usedBlobs[d] && s.leases[d] == 0 {
			if err := os.Remove(s.blobPath(d)); err != nil {
				return trash, err
			}
		}
	}
	return trash, s.saveLocked()
}

// removeAll deletes the paths collectLocked returned.
func (s *Store) removeAll(paths []string) error {
	var errs []error
	for _, p := range paths {
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}

// lease protects content from garbage collection until release.
func (s *Store) lease(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.leases[k]++
	}
}

func (s *Store) release(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.leases[k]--; s.leases[k] <= 0 {
			delete(s.leases, k)
		}
	}
}

// saveLocked writes index.json atomically.
func (s *Store) saveLocked() error {
	b, err := json.MarshalIndent(s.idx, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(s.root, "index.json"), s.tmpDir(), b); err != nil {
		return fmt.Errorf("write index.json: %w", err)
	}
	return nil
}

func (s *Store) tmpDir() string { return filepath.Join(s.root, "tmp") }

// CreateTemp creates a file in the store's tmp directory, for an archive
// on its way to Import: Open empties the directory, so a crash midway
// leaves nothing behind. The caller removes the file.
func (s *Store) CreateTemp(pattern string) (*os.File, error) {
	return os.CreateTemp(s.tmpDir(), pattern)
}

func (s *Store) layerDir(diffID string) string {
	return filepath.Join(s.root, "layers", "sha256", strings.TrimPrefix(diffID, "sha256:"))
}

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.root, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// writeFileAtomic writes b to path through a synced temp file in tmp (on
// the same file system) and a rename, so readers see the old or the new
// content, never a mix.
func writeFileAtomic(path, tmp string, b []byte) error {
	f, err := os.CreateTemp(tmp, filepath.Base(path)+".")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// keychain resolves registry credentials: those given with WithAuth
// first, then the fallback keychain.
type keychain struct {
	static   map[string]authn.Authenticator
	fallback authn.Keychain
}

func (k *keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if a, ok := k.static[registryKey(r.RegistryStr())]; ok {
		return a, nil
	}
	if k.fallback == nil {
		return authn.Anonymous, nil
	}
	return k.fallback.Resolve(r)
}

// registryKey folds Docker Hub's aliases into one name.
func registryKey(host string) string {
	if host == "docker.io" || host == "registry-1.docker.io" {
		return "index.docker.io"
	}
	return host
}
