package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestImportDockerSave(t *testing.T) {
	s := newTestStore(t)
	base := plainLayer(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/os-release", body: "base"})
	app := testImage(t, "APP=1", base, plainLayer(t, entry{name: "app", body: "app"}))
	tool := testImage(t, "TOOL=1", base, plainLayer(t, entry{name: "tool", body: "tool"}))

	path := filepath.Join(t.TempDir(), "save.tar")
	refs := map[name.Reference]v1.Image{
		name.MustParseReference("example.com/app:v1"): app,
		name.MustParseReference("example.com/app:v2"): app, // two repo tags, one image
		name.MustParseReference("tool:1.0"):           tool,
	}
	if err := tarball.MultiRefWriteToFile(path, refs); err != nil {
		t.Fatal(err)
	}
	var prog progressLog
	imgs, err := s.Import(context.Background(), path, prog.add)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	var got []string
	for _, img := range imgs {
		got = append(got, img.Ref)
	}
	sort.Strings(got)
	want := []string{"docker.io/library/tool:1.0", "example.com/app:v1", "example.com/app:v2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("imported refs (-want +got):\n%s", diff)
	}
	if prog.phases()[PhaseDone] != 3 || prog.phases()[PhaseUnpack] == 0 {
		t.Errorf("progress phases = %v, want unpack events and 3 done", prog.phases())
	}

	for _, ref := range []string{"tool:1.0", "docker.io/library/tool:1.0", "index.docker.io/library/tool:1.0"} {
		img, err := s.Get(context.Background(), ref)
		if err != nil {
			t.Fatalf("Get(%q): %v", ref, err)
		}
		if img.Ref != "docker.io/library/tool:1.0" || len(img.Layers) != 2 {
			t.Errorf("Get(%q) = %s with %d layers", ref, img.Ref, len(img.Layers))
		}
		if got := readFile(t, filepath.Join(img.Layers[1], "tool")); got != "tool" {
			t.Errorf("tool layer holds %q", got)
		}
	}
	appImg, err := s.Get(context.Background(), "example.com/app:v2")
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := app.ConfigName()
	if appImg.ID != wantID.String() {
		t.Errorf("ID = %s, want config digest %s", appImg.ID, wantID)
	}
	if diff := cmp.Diff(Config{Env: []string{"APP=1"}, Cmd: []string{"/bin/sh"}, WorkingDir: "/work"}, appImg.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if appImg.Size != int64(len("base")+len("app")) {
		t.Errorf("size = %d, want %d", appImg.Size, len("base")+len("app"))
	}
	if !exists(s.blobPath(appImg.Digest)) || !exists(s.blobPath(appImg.ID)) {
		t.Error("manifest or config blob missing")
	}
	byID, err := s.Get(context.Background(), appImg.ID)
	if err != nil || byID.ID != appImg.ID {
		t.Errorf("Get by ID = %v, %v", byID, err)
	}
	list, err := s.List(context.Background())
	if err != nil || len(list) != 3 {
		t.Fatalf("List = %d images, %v; want 3", len(list), err)
	}
	if got := dirEntries(t, filepath.Join(s.root, "layers", "sha256")); len(got) != 3 {
		t.Errorf("%d layer dirs, want 3 (the base layer is shared)", len(got))
	}
}

func TestRemove(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	base := gzipLayer(t, entry{name: "base", body: "base"})
	a := storeImage(t, s, "example.com/a:1", testImage(t, "A=1", base, gzipLayer(t, entry{name: "a", body: "a"})))
	storeImage(t, s, "example.com/a:alias", testImage(t, "A=1", base, gzipLayer(t, entry{name: "a", body: "a"})))
	b := storeImage(t, s, "example.com/b:1", testImage(t, "B=1", base, gzipLayer(t, entry{name: "b", body: "b"})))
	shared, onlyA, onlyB := a.Layers[0], a.Layers[1], b.Layers[1]

	steps := []struct {
		remove  string
		gone    []string
		present []string
	}{
		{remove: "example.com/b:1", gone: []string{onlyB, s.blobPath(b.Digest), s.blobPath(b.ID)}, present: []string{shared, onlyA}},
		{remove: "example.com/a:alias", present: []string{shared, onlyA, s.blobPath(a.Digest)}},
		{remove: "example.com/a:1", gone: []string{shared, onlyA, s.blobPath(a.Digest)}},
	}
	for _, st := range steps {
		if err := s.Remove(ctx, st.remove); err != nil {
			t.Fatalf("Remove(%s): %v", st.remove, err)
		}
		if _, err := s.Get(ctx, st.remove); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Get(%s) after Remove: %v, want ErrNotFound", st.remove, err)
		}
		for _, p := range st.gone {
			if exists(p) {
				t.Errorf("after removing %s: %s still exists", st.remove, p)
			}
		}
		for _, p := range st.present {
			if !exists(p) {
				t.Errorf("after removing %s: %s is gone", st.remove, p)
			}
		}
	}
	if err := s.Remove(ctx, "example.com/a:1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Remove: %v, want ErrNotFound", err)
	}
	for _, d := range []string{"layers/sha256", "blobs/sha256"} {
		if got := dirEntries(t, filepath.Join(s.root, d)); len(got) != 0 {
			t.Errorf("%s not empty: %v", d, got)
		}
	}
}

func TestImportOCILayout(t *testing.T) {
	named := testImage(t, "N=1", gzipLayer(t, entry{name: "named", body: "n"}))
	tagOnly := testImage(t, "T=1", gzipLayer(t, entry{name: "tagonly", body: "t"}))
	amd := testImage(t, "P=host", gzipLayer(t, entry{name: "host", body: "h"}))
	other := testImage(t, "P=other", gzipLayer(t, entry{name: "other", body: "o"}))
	otherArch := "arm64"
	if runtime.GOARCH == "arm64" {
		otherArch = "amd64"
	}
	multi := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)

	dir := filepath.Join(t.TempDir(), "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(named, layout.WithAnnotations(map[string]string{annotationRefName: "example.com/named:v1"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(tagOnly, layout.WithAnnotations(map[string]string{annotationRefName: "v2"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(multi, layout.WithAnnotations(map[string]string{annotationImageName: "docker.io/library/multi:1"})); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "layout.tar")
	writeDirTar(t, dir, tarPath)

	namedDigest, _ := named.Digest()
	tagOnlyID, _ := tagOnly.ConfigName()
	amdDigest, _ := amd.Digest()
	want := map[string]string{
		"example.com/named:v1":      namedDigest.String(),
		tagOnlyID.String():          "",
		"docker.io/library/multi:1": amdDigest.String(),
	}
	for _, tt := range []struct{ name, path string }{{"dir", dir}, {"tar", tarPath}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			imgs, err := s.Import(context.Background(), tt.path, nil)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if len(imgs) != len(want) {
				t.Errorf("imported %d images, want %d", len(imgs), len(want))
			}
			for ref, digest := range want {
				img, err := s.Get(context.Background(), ref)
				if err != nil {
					t.Errorf("Get(%s): %v", ref, err)
					continue
				}
				if digest != "" && img.Digest != digest {
					t.Errorf("%s digest = %s, want the layout's manifest digest %s", ref, img.Digest, digest)
				}
			}
			multiImg, err := s.Get(context.Background(), "multi:1")
			if err != nil {
				t.Fatal(err)
			}
			if !exists(filepath.Join(multiImg.Layers[0], "host")) {
				t.Errorf("multi-platform index resolved to the wrong platform: %v", dirEntries(t, multiImg.Layers[0]))
			}
			if got := dirEntries(t, s.tmpDir()); len(got) != 0 {
				t.Errorf("tmp dir not cleaned: %v", got)
			}
		})
	}
}

func TestImportErrors(t *testing.T) {
	s := newTestStore(t)
	junk := filepath.Join(t.TempDir(), "junk.tar")
	if err := os.WriteFile(junk, tarBytes(t, entry{name: "hello", body: "x"}), 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(t.TempDir(), "s390x.tar")
	img := testImage(t, "F=1", plainLayer(t, entry{name: "f", body: "f"}))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "s390x"
	img, _ = mutate.ConfigFile(img, cf)
	if err := tarball.WriteToFile(foreign, name.MustParseReference("example.com/foreign:1"), img); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.tar")
	if err := os.WriteFile(garbage, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The path is the daemon's copy of an upload: only a missing one is
	// named, which an upload never is.
	tests := []struct {
		name  string
		path  string
		want  error
		named bool
	}{
		{"missing", filepath.Join(t.TempDir(), "nope.tar"), errdefs.ErrNotFound, true},
		{"other architecture", foreign, errdefs.ErrInvalidArgument, false},
		{"not an image", junk, errdefs.ErrInvalidArgument, false},
		{"not a tar", garbage, errdefs.ErrInvalidArgument, false},
		{"empty dir", t.TempDir(), errdefs.ErrInvalidArgument, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Import(context.Background(), tt.path, nil)
			if !errors.Is(err, tt.want) {
				t.Errorf("Import: %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), tt.path) != tt.named {
				t.Errorf("Import: %v; names the path: %v, want %v", err, !tt.named, tt.named)
			}
		})
	}
}

// writeDirTar writes dir's files into a tar at dst, names relative to dir.
func writeDirTar(t *testing.T, dir, dst string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(dir, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// registryAuth is how a test registry wants clients to authenticate.
type registryAuth int

const (
	authNone   registryAuth = iota
	authBasic               // basic credentials on every request
	authBearer              // basic credentials at the token endpoint, then a bearer token
)

// testRegistry is an in-process registry on 127.0.0.1 that counts
// manifest GETs, can want credentials and can hold manifest GETs.
type testRegistry struct {
	*httptest.Server
	manifestGets atomic.Int32
	auth         registryAuth
	user, pass   string
	hold         chan struct{} // when set, manifest GETs wait for it to close
}

const testToken = "t0ken"

func newTestRegistry(t *testing.T, auth registryAuth, user, pass string) *testRegistry {
	t.Helper()
	reg := &testRegistry{auth: auth, user: user, pass: pass}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		basicOK := func() bool {
			u, p, ok := r.BasicAuth()
			return ok && u == reg.user && p == reg.pass
		}
		switch {
		case reg.auth == authBasic && !basicOK():
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		case reg.auth == authBearer && r.URL.Path == "/token":
			if !basicOK() {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"token": "`+testToken+`"}`)
			return
		case reg.auth == authBearer && r.Header.Get("Authorization") != "Bearer "+testToken:
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+reg.URL+`/token",service="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/") {
			reg.manifestGets.Add(1)
			if reg.hold != nil {
				<-reg.hold
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	return reg
}

// host is the registry's host:port, a loopback address.
func (r *testRegistry) host() string { return strings.TrimPrefix(r.URL, "http://") }

func (r *testRegistry) push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	opts := []remote.Option{}
	if r.auth != authNone {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass}))
	}
	nr, err := name.ParseReference(r.host() + "/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(nr, img, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// mixedImage has a gzip, a zstd and an uncompressed layer.
func mixedImage(t *testing.T) v1.Image {
	t.Helper()
	zb := tarBytes(t, entry{name: "zstd", body: "z"})
	zl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(zb)), nil },
		tarball.WithCompression(compression.ZStd))
	if err != nil {
		t.Fatal(err)
	}
	return testImage(t, "MIXED=1",
		gzipLayer(t, entry{name: "gzip", body: "g"}),
		zl,
		plainLayer(t, entry{name: "plain", body: "p"}),
	)
}

func TestPull(t *testing.T) {
	alice := &authn.Basic{Username: "alice", Password: "s3cret"}
	tests := []struct {
		name     string
		regAuth  registryAuth
		userAuth authn.Authenticator
		ref      string
		wantErr  error
	}{
		{name: "anonymous", ref: "team/app:v1"},
		{name: "basic auth", regAuth: authBasic, userAuth: alice, ref: "team/app:v1"},
		{name: "bearer token", regAuth: authBearer, userAuth: alice, ref: "team/app:v1"},
		{name: "wrong password", regAuth: authBasic, userAuth: &authn.Basic{Username: "alice", Password: "nope"}, ref: "team/app:v1", wantErr: errdefs.ErrUnauthenticated},
		{name: "wrong password for token", regAuth: authBearer, userAuth: &authn.Basic{Username: "alice", Password: "nope"}, ref: "team/app:v1", wantErr: errdefs.ErrUnauthenticated},
		{name: "no credentials", regAuth: authBasic, ref: "team/app:v1", wantErr: errdefs.ErrUnauthenticated},
		{name: "unknown tag", ref: "team/app:missing", wantErr: errdefs.ErrNotFound},
	}
	img := mixedImage(t)
	wantDigest, _ := img.Digest()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newTestRegistry(t, tt.regAuth, alice.Username, alice.Password)
			reg.push(t, "team/app:v1", img)
			var opts []Option
			if tt.userAuth != nil {
				opts = append(opts, WithAuth(reg.host(), tt.userAuth))
			}
			s := newTestStore(t, opts...)
			var prog progressLog
			got, err := s.Pull(context.Background(), reg.host()+"/"+tt.ref, prog.add)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Pull: %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if got.Ref != reg.host()+"/"+tt.ref || got.Digest != wantDigest.String() {
				t.Errorf("pulled %s@%s, want %s@%s", got.Ref, got.Digest, tt.ref, wantDigest)
			}
			for i, f := range []string{"gzip", "zstd", "plain"} {
				if !exists(filepath.Join(got.Layers[i], f)) {
					t.Errorf("layer %d lacks %s", i, f)
				}
			}
			if ph := prog.phases(); ph[PhaseResolve] == 0 || ph[PhaseDownload] == 0 || ph[PhaseUnpack] == 0 || ph[PhaseDone] != 1 {
				t.Errorf("progress phases = %v", ph)
			}
			layers, _ := img.Layers()
			for _, l := range layers {
				d, _ := l.Digest()
				size, _ := l.Size()
				ev, ok := prog.last(PhaseDownload, d.String())
				if !ok || ev.Current != size || ev.Total != size {
					t.Errorf("last download progress of %s = %+v, want %d of %d bytes", d, ev, size, size)
				}
			}
			if _, err := s.Get(context.Background(), got.Ref); err != nil {
				t.Errorf("Get after Pull: %v", err)
			}
			if got := dirEntries(t, s.tmpDir()); len(got) != 0 {
				t.Errorf("tmp dir not cleaned: %v", got)
			}
		})
	}
}

func TestPullIndexPicksPlatform(t *testing.T) {
	reg := newTestRegistry(t, authNone, "", "")
	host := testImage(t, "P=host", gzipLayer(t, entry{name: "host", body: "h"}))
	other := testImage(t, "P=other", gzipLayer(t, entry{name: "other", body: "o"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}}},
		mutate.IndexAddendum{Add: host, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	nr, err := name.ParseReference(reg.host() + "/multi:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(nr, idx); err != nil {
		t.Fatal(err)
	}
	s := newTestStore(t)
	img, err := s.Pull(context.Background(), reg.host()+"/multi:1", nil)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	want, _ := host.Digest()
	if img.Digest != want.String() || !exists(filepath.Join(img.Layers[0], "host")) {
		t.Errorf("pulled %s, want the %s image %s", img.Digest, runtime.GOARCH, want)
	}
}

func TestLocalNamesNeverPulled(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	if _, err := s.Pull(ctx, "agent2env/python", nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Pull(agent2env/python): %v, want ErrInvalidArgument", err)
	}
	if _, err := s.Ensure(ctx, "agent2env/ruby", nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Ensure(agent2env/ruby): %v, want ErrNotFound", err)
	}
	if _, err := s.Build(ctx, "agent2env/ruby", nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Build(agent2env/ruby): %v, want ErrInvalidArgument", err)
	}
}

func TestEnsureConcurrentSharesOnePull(t *testing.T) {
	reg := newTestRegistry(t, authNone, "", "")
	img := mixedImage(t)
	reg.push(t, "team/app:v1", img)
	reg.manifestGets.Store(0)
	reg.hold = make(chan struct{})
	s := newTestStore(t)

	const callers = 8
	var wg sync.WaitGroup
	var joined sync.WaitGroup
	results := make([]*Image, callers)
	errs := make([]error, callers)
	progs := make([]progressLog, callers)
	for i := range callers {
		wg.Add(1)
		joined.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			results[i], errs[i] = s.Ensure(context.Background(), reg.host()+"/team/app:v1", func(p Progress) {
				once.Do(joined.Done)
				progs[i].add(p)
			})
		}()
	}
	// Every caller has seen the resolve event before the registry answers.
	joined.Wait()
	close(reg.hold)
	wg.Wait()

	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if results[i].Digest != results[0].Digest {
			t.Errorf("caller %d got digest %s, caller 0 %s", i, results[i].Digest, results[0].Digest)
		}
		if ph := progs[i].phases(); ph[PhaseDone] != 1 {
			t.Errorf("caller %d progress phases = %v, want one done", i, ph)
		}
	}
	if n := reg.manifestGets.Load(); n != 1 {
		t.Errorf("registry served %d manifest GETs, want 1", n)
	}
	if _, err := s.Ensure(context.Background(), reg.host()+"/team/app:v1", nil); err != nil {
		t.Fatal(err)
	}
	if n := reg.manifestGets.Load(); n != 1 {
		t.Errorf("Ensure of a stored image hit the registry (%d manifest GETs)", n)
	}
}

// cancellingReader serves a layer and cancels ctx after n bytes, as a
// ^C in the middle of an unpack would. From then on it serves slowly, as
// a network would, so the unpack cannot race the cancellation to the end.
type cancellingReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(b []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
		time.Sleep(10 * time.Millisecond)
	}
	if len(b) > 4096 {
		b = b[:4096]
	}
	n, err := c.r.Read(b)
	c.n -= n
	return n, err
}

func (c *cancellingReader) Close() error { return nil }

func TestInterruptedUnpackLeavesNoLayer(t *testing.T) {
	s := newTestStore(t)
	var entries []entry
	for i := range 50 {
		entries = append(entries, entry{name: "f" + strings.Repeat("x", i), body: strings.Repeat("data", 1000)})
	}
	layer := plainLayer(t, entries...)
	img := testImage(t, "A=1", layer)
	cfg, _ := img.RawConfigFile()
	r, _ := parseRef("example.com/crash:v1")

	ctx, cancel := context.WithCancel(context.Background())
	src := source{refs: []reference{r}, config: cfg, layers: []layerSource{{open: func() (io.ReadCloser, error) {
		rc, err := layer.Uncompressed()
		return &cancellingReader{r: rc, n: 50_000, cancel: cancel}, err
	}}}}
	if _, err := s.commit(ctx, src, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit: %v, want context.Canceled", err)
	}
	if _, err := s.Get(context.Background(), "example.com/crash:v1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after interrupted unpack: %v, want ErrNotFound", err)
	}
	if got := dirEntries(t, filepath.Join(s.root, "layers", "sha256")); len(got) != 0 {
		t.Errorf("layer dirs after interrupted unpack: %v", got)
	}
	if got := dirEntries(t, s.tmpDir()); len(got) != 0 {
		t.Errorf("tmp dir after interrupted unpack: %v", got)
	}
	// The next attempt starts afresh and succeeds.
	got := storeImage(t, s, "example.com/crash:v1", img)
	if len(dirEntries(t, got.Layers[0])) != 50 {
		t.Errorf("layer has %d entries, want 50", len(dirEntries(t, got.Layers[0])))
	}
}

// TestOpenRecovers simulates a crash at each step of storing an image and
// checks Open leaves a consistent store.
func TestOpenRecovers(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	open := func() *Store {
		s, err := Open(root, WithLogger(slog.New(slog.DiscardHandler)), WithKeychain(authn.NewMultiKeychain()))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	kept := storeImage(t, s, "example.com/kept:v1", testImage(t, "K=1", gzipLayer(t, entry{name: "k", body: "k"})))
	broken := storeImage(t, s, "example.com/broken:v1", testImage(t, "B=1", gzipLayer(t, entry{name: "b", body: "b"})))

	// A crash mid-unpack, one between unpack and commit, a stray blob,
	// and a layer deleted behind the store's back.
	leftovers := []string{
		filepath.Join(s.tmpDir(), "unpack-123"),
		filepath.Join(s.root, "layers", "sha256", strings.Repeat("0", 64)),
	}
	for _, d := range leftovers {
		if err := os.MkdirAll(filepath.Join(d, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// An archive spooled for an import the crash interrupted.
	spool, err := s.CreateTemp("import-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	spool.Close()
	leftovers = append(leftovers, spool.Name())
	stray := s.blobPath("sha256:" + strings.Repeat("1", 64))
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(broken.Layers[0]); err != nil {
		t.Fatal(err)
	}

	s = open()
	for _, p := range append(leftovers, stray) {
		if exists(p) {
			t.Errorf("%s survived Open", p)
		}
	}
	if _, err := s.Get(context.Background(), "example.com/broken:v1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("image with a missing layer: %v, want ErrNotFound", err)
	}
	got, err := s.Get(context.Background(), "example.com/kept:v1")
	if err != nil {
		t.Fatalf("Get kept: %v", err)
	}
	if diff := cmp.Diff(kept, got); diff != "" {
		t.Errorf("kept image changed (-before +after):\n%s", diff)
	}
}

func TestPullMediaTypes(t *testing.T) {
	// A layer blob labelled gzip that is really a plain tar, as some
	// registries serve, still unpacks: compression is sniffed.
	reg := newTestRegistry(t, authNone, "", "")
	img := testImage(t, "M=1", &relabelled{Layer: plainLayer(t, entry{name: "mislabelled", body: "m"}), mt: types.DockerLayer})
	reg.push(t, "team/mislabelled:v1", img)
	s := newTestStore(t)
	got, err := s.Pull(context.Background(), reg.host()+"/team/mislabelled:v1", nil)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if !exists(filepath.Join(got.Layers[0], "mislabelled")) {
		t.Error("mislabelled layer not unpacked")
	}
}

type relabelled struct {
	v1.Layer
	mt types.MediaType
}

func (r *relabelled) MediaType() (types.MediaType, error) { return r.mt, nil }
