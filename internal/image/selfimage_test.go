package image

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestSelfImage writes the agent2env image as make image does, imports it
// into a store, and checks what a runtime would run: the entrypoint, the
// user, and the binary's bytes and mode in the unpacked layer.
func TestSelfImage(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "agent2env")
	agentBin := filepath.Join(dir, "agent2env-agent")
	certs := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(binary, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agentBin, []byte("\x7fELF the agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := SelfImageOptions{Agent: agentBin, CACerts: certs, Created: time.Unix(1700000000, 0), Version: "v1.2.3"}
	img, err := SelfImage(binary, opts)
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, "image.tar")
	tag, err := name.NewTag("example.com/agent2env:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.MultiWriteToFile(path, map[name.Tag]v1.Image{tag: img}); err != nil {
		t.Fatal(err)
	}
	s := newTestStore(t)
	imgs, err := s.Import(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if len(imgs) != 1 || imgs[0].Ref != "example.com/agent2env:v1" {
		t.Fatalf("imported %v, want example.com/agent2env:v1", imgs)
	}
	got := imgs[0]
	if diff := cmp.Diff([]string{SelfImagePath}, got.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if got.Config.User != "65532:65532" {
		t.Errorf("user %q, want the unprivileged 65532:65532", got.Config.User)
	}
	root := got.Layers[0]
	for file, want := range map[string]struct {
		body string
		mode os.FileMode
	}{
		SelfImagePath:                        {"\x7fELF not really", 0o755},
		SelfImageAgentPath:                   {"\x7fELF the agent", 0o755},
		"/etc/ssl/certs/ca-certificates.crt": {"-----BEGIN CERTIFICATE-----\n", 0o644},
	} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		fi, _ := os.Stat(filepath.Join(root, file))
		if string(b) != want.body || fi.Mode().Perm() != want.mode {
			t.Errorf("%s: %q %v, want %q %v", file, b, fi.Mode().Perm(), want.body, want.mode)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("/tmp: %v, %v; want a sticky directory", fi, err)
	}

	// The same inputs give the same digest; another time, another one.
	again, err := SelfImage(binary, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Created = opts.Created.Add(time.Second)
	later, err := SelfImage(binary, opts)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	d3, _ := later.Digest()
	if d1 != d2 || d1 == d3 {
		t.Errorf("digests %s, %s (same inputs), %s (a second later): want the first two equal and the third not", d1, d2, d3)
	}

	if _, err := SelfImage(binary, SelfImageOptions{Agent: agentBin}); err == nil {
		t.Error("SelfImage without CA certificates: no error")
	}
	if _, err := SelfImage(binary, SelfImageOptions{CACerts: certs}); err == nil {
		t.Error("SelfImage without the agent binary: no error")
	}
}
