package image

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/buildcache"
)

// TestPruneCache checks what the image builds leave of a cache dir holding
// this version's builds and other versions' (the rule itself is
// buildcache's, tested there): BuiltinOCI and AgentCLIs, having made
// theirs, remove every file of other versions unused for
// buildcache.Grace, tars, zstd copies, unpacked npm layers, work dirs and
// locks alike, and keep the current ones, the ones used lately, and names
// that are no build's.
func TestPruneCache(t *testing.T) {
	python := recipes["agent2env/python:latest"].hash()
	npm := recipes["agent2env/agent:latest"].npm.hash()
	old := sha256Hash([]byte("an older recipe")).Hex
	oldNPM := sha256Hash([]byte("an older npm part")).Hex
	lately := sha256Hash([]byte("a recipe of another checkout")).Hex
	long := time.Now().Add(-2 * buildcache.Grace)
	// name in the cache dir → a directory?
	others := map[string]bool{
		old + ".tar": false, old + ".tar.lock": false, old + ".build": true, old + ".tar.zst": false,
		old + ".tar.zst.lock": false, old + ".tar.zst.tmp12": false,
		oldNPM + ".npm.tar": false, oldNPM + ".npm.tar.lock": false, oldNPM + ".npm.d": true, oldNPM + ".npm.d.lock": false,
		oldNPM + ".npm.d.partial": true, oldNPM + ".npm.tar.zst": false,
		lately + ".tar": false, lately + ".tar.lock": false,
		"criu-4.1.1-abc": true, "peers": true, "notes.tar": false, old[:60] + ".tar": false,
	}
	kept := []string{"criu-4.1.1-abc", lately + ".tar", lately + ".tar.lock", old[:60] + ".tar", "notes.tar", "peers"}
	fill := func(t *testing.T, cache string) {
		for name, dir := range others {
			path := filepath.Join(cache, name)
			if dir {
				if err := os.MkdirAll(filepath.Join(path, "usr", "bin"), 0o755); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
			if name != lately+".tar" {
				if err := os.Chtimes(path, long, long); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T, s *Store, cache string)
		want []string // this version's files left
	}{
		{name: "BuiltinOCI",
			make: func(t *testing.T, s *Store, cache string) {
				// Its tar, built long ago: using it marks it used.
				path := filepath.Join(cache, python+".tar")
				if err := os.WriteFile(path, tarBytes(t, entry{name: "./etc/hostname", body: "sandbox\n"}), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(path, long, long); err != nil {
					t.Fatal(err)
				}
				if _, err := s.BuiltinOCI(context.Background(), "agent2env/python", nil); err != nil {
					t.Fatalf("BuiltinOCI: %v", err)
				}
				if fi, err := os.Stat(path); err != nil || !fi.ModTime().After(long) {
					t.Errorf("the cached tar used is not marked used: %v", err)
				}
			},
			want: []string{python + ".tar", python + ".tar.lock", python + ".tar.zst", python + ".tar.zst.lock"}},
		{name: "AgentCLIs",
			make: func(t *testing.T, s *Store, cache string) {
				if arch := recipes["agent2env/agent:latest"].npm.arch; arch != runtime.GOARCH {
					t.Skipf("the agent image's npm layer is for %s only, and this host is %s", arch, runtime.GOARCH)
				}
				if err := os.WriteFile(filepath.Join(cache, npm+".npm.tar"), tarBytes(t, entry{name: "./opt/", typ: tar.TypeDir, mode: 0o755}), 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := s.AgentCLIs(context.Background(), nil); err != nil {
					t.Fatalf("AgentCLIs: %v", err)
				}
			},
			want: []string{npm + ".npm.d", npm + ".npm.d.lock", npm + ".npm.tar", npm + ".npm.tar.lock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			fill(t, cache)
			t.Setenv("PATH", "")
			tc.make(t, newTestStore(t, WithCacheDir(cache)), cache)
			want := append(append([]string(nil), kept...), tc.want...)
			if diff := cmp.Diff(slices.Sorted(slices.Values(want)), dirEntries(t, cache)); diff != "" {
				t.Errorf("left in the cache dir (-want +got):\n%s", diff)
			}
		})
	}
}
