package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/klauspost/compress/zstd"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// TestBuiltinOCI puts small layer tars where the build cache keeps a
// recipe's (so that nothing is built) and checks the OCI image
// BuiltinOCI makes of them, written to an OCI layout as a registry would
// be sent it: the index and the manifest with their media types, the
// zstd layers, each beside its tar in the cache dir, with digests and
// sizes that match what is stored, the layers' contents those tars', and
// the config the recipe's.
func TestBuiltinOCI(t *testing.T) {
	rootfs := tarBytes(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./usr/bin/python3", body: "fake python", mode: 0o755},
		entry{name: "./etc/passwd", body: "sandbox:x:1000:1000::/home/sandbox:/bin/bash\n"},
	)
	npmLayer := tarBytes(t, entry{name: "./opt/agent2env/node_modules/x/index.js", body: "module.exports = 1\n"})
	agent := recipes["agent2env/agent:latest"]
	for _, tc := range []struct {
		name    string
		recipe  recipe
		tars    map[string][]byte // cache file → content, bottom layer first
		wantErr error             // only on a host the recipe is not for
	}{
		{name: "agent2env/python", recipe: recipes["agent2env/python:latest"],
			tars: map[string][]byte{recipes["agent2env/python:latest"].hash() + ".tar": rootfs}},
		{name: "code-interpreter", recipe: recipes["agent2env/code-interpreter:latest"],
			tars: map[string][]byte{recipes["agent2env/code-interpreter:latest"].hash() + ".tar": rootfs}},
		{name: "agent2env/agent", recipe: agent,
			tars:    map[string][]byte{agent.hash() + ".tar": rootfs, agent.npm.hash() + ".npm.tar": npmLayer},
			wantErr: map[bool]error{true: nil, false: errdefs.ErrInvalidArgument}[runtime.GOARCH == agent.npm.arch]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			var order []string // the tars' names, bottom layer first
			for file, b := range tc.tars {
				if err := os.WriteFile(filepath.Join(cache, file), b, 0o644); err != nil {
					t.Fatal(err)
				}
				order = append(order, file)
			}
			// The Debian layer's name ends .tar only; it comes first.
			slices.SortFunc(order, func(a, b string) int { return len(a) - len(b) })
			t.Setenv("PATH", "") // mmdebstrap and npm cannot run: the cache must answer
			s := newTestStore(t, WithCacheDir(cache))

			img, err := s.BuiltinOCI(context.Background(), tc.name, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("BuiltinOCI on %s: %v, want %v", runtime.GOARCH, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("BuiltinOCI: %v", err)
			}
			// Fast: validate reads layers as gzip only; the layers are
			// checked below.
			if err := validate.Image(img, validate.Fast); err != nil {
				t.Errorf("validate: %v", err)
			}

			// The image as a registry is sent it: an OCI layout.
			dir := t.TempDir()
			p, err := layout.Write(dir, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tc.name})); err != nil {
				t.Fatal(err)
			}
			var index v1.IndexManifest
			readJSON(t, filepath.Join(dir, "index.json"), &index)
			if len(index.Manifests) != 1 {
				t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
			}
			md := index.Manifests[0]
			if md.MediaType != types.OCIManifestSchema1 || md.Annotations["org.opencontainers.image.ref.name"] != tc.name {
				t.Errorf("index entry %s named %q, want %s named %q", md.MediaType, md.Annotations["org.opencontainers.image.ref.name"], types.OCIManifestSchema1, tc.name)
			}
			checkBlob(t, dir, md)
			var m v1.Manifest
			readJSON(t, blobPath(dir, md.Digest), &m)
			if m.SchemaVersion != 2 || m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
				t.Errorf("manifest v%d %s, config %s; want v2 %s, config %s", m.SchemaVersion, m.MediaType, m.Config.MediaType, types.OCIManifestSchema1, types.OCIConfigJSON)
			}
			checkBlob(t, dir, m.Config)
			if len(m.Layers) != len(order) {
				t.Fatalf("%d layers, want %d", len(m.Layers), len(order))
			}
			var wantDiffIDs []v1.Hash
			for i, l := range m.Layers {
				tarPath := filepath.Join(cache, order[i])
				if l.MediaType != types.OCILayerZStd {
					t.Errorf("layer %d: media type %s, want %s", i, l.MediaType, types.OCILayerZStd)
				}
				checkBlob(t, dir, l)
				// The blob is the copy kept beside the tar, and holds the tar.
				zst, err := os.ReadFile(tarPath + ".zst")
				if err != nil {
					t.Fatalf("layer %d: no compressed copy beside its tar: %v", i, err)
				}
				if got := sha256Hash(zst); got != l.Digest {
					t.Errorf("layer %d: digest %s, the cache's copy %s", i, l.Digest, got)
				}
				dec, err := zstd.NewReader(bytes.NewReader(zst))
				if err != nil {
					t.Fatal(err)
				}
				plain, err := io.ReadAll(dec)
				dec.Close()
				if err != nil || !bytes.Equal(plain, tc.tars[order[i]]) {
					t.Errorf("layer %d: decompressed to %d bytes (%v), want its tar's %d", i, len(plain), err, len(tc.tars[order[i]]))
				}
				wantDiffIDs = append(wantDiffIDs, sha256Hash(tc.tars[order[i]]))
			}

			var cf v1.ConfigFile
			readJSON(t, blobPath(dir, m.Config.Digest), &cf)
			if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || cf.RootFS.Type != "layers" {
				t.Errorf("config %s/%s rootfs %q, want linux/%s layers", cf.OS, cf.Architecture, cf.RootFS.Type, runtime.GOARCH)
			}
			if diff := cmp.Diff(wantDiffIDs, cf.RootFS.DiffIDs); diff != "" {
				t.Errorf("diff IDs, the tars' digests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.recipe.config(), cf.Config); diff != "" {
				t.Errorf("config, the recipe's (-want +got):\n%s", diff)
			}

			// Made again from the same cache: the same image.
			again, err := s.BuiltinOCI(context.Background(), tc.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d1, d2 := mustDigest(t, img), mustDigest(t, again); d1 != d2 {
				t.Errorf("made again: %s, first %s", d2, d1)
			}
		})
	}
}

func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

func blobPath(dir string, h v1.Hash) string {
	return filepath.Join(dir, "blobs", h.Algorithm, h.Hex)
}

// checkBlob checks that the layout in dir has d's blob, of d's size and
// digest.
func checkBlob(t *testing.T, dir string, d v1.Descriptor) {
	t.Helper()
	b, err := os.ReadFile(blobPath(dir, d.Digest))
	if err != nil {
		t.Errorf("%s blob: %v", d.MediaType, err)
		return
	}
	if got := sha256Hash(b); got != d.Digest || int64(len(b)) != d.Size {
		t.Errorf("%s blob: %s, %d bytes; its descriptor says %s, %d", d.MediaType, got, len(b), d.Digest, d.Size)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
