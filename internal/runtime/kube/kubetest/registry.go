package kubetest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images every [Node]'s registry holds, by repository:tag; a Pod
// names them with [Node.Image].
const (
	// BusyboxImage is Debian's static busybox with a link per applet in
	// /bin (sh, sleep, cat, httpd, nc, ...), /tmp, and the users root,
	// nobody and sandbox (1000:1000, home /home/sandbox, which the image
	// does not hold). Its command is sh.
	BusyboxImage = "kubetest/busybox:latest"
	// pauseImage is the Pods' sandbox image: busybox sleeping for ever.
	pauseImage = "kubetest/pause:latest"
)

// busyboxPath is where busybox-static installs the binary.
const busyboxPath = "/bin/busybox"

// startRegistry serves an OCI registry on a loopback port, its blobs in
// dir, until close is called.
func startRegistry(dir string) (host string, close func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)), registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	return l.Addr().String(), func() { _ = srv.Close() }, nil
}

// push writes img to the registry at host as repoTag and returns its
// reference there.
func push(host, repoTag string, img v1.Image) (string, error) {
	ref, err := name.NewTag(host+"/"+repoTag, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("push %s: %w", repoTag, err)
	}
	if err := remote.Write(ref, img); err != nil {
		return "", fmt.Errorf("push %s: %w", repoTag, err)
	}
	return ref.String(), nil
}

// busyboxImages returns the busybox image and the pause image, both of
// one layer made from the host's busybox.
func busyboxImages() (busybox, pause v1.Image, err error) {
	layer, err := busyboxLayer()
	if err != nil {
		return nil, nil, err
	}
	env := []string{"PATH=/bin"}
	busybox, err = singleLayerImage(layer, v1.Config{Cmd: []string{"sh"}, Env: env, WorkingDir: "/"})
	if err != nil {
		return nil, nil, err
	}
	// PID 1 of every Pod's sandbox; killed, never asked to stop.
	pause, err = singleLayerImage(layer, v1.Config{Entrypoint: []string{"/bin/sleep", "inf"}, Env: env, WorkingDir: "/"})
	return busybox, pause, err
}

func singleLayerImage(layer v1.Layer, cfg v1.Config) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{Architecture: "amd64", OS: "linux", Config: cfg})
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, layer)
}

// busyboxLayer is /bin/busybox, a symbolic link to it for each of its
// applets, a passwd and group file, and /tmp.
func busyboxLayer() (v1.Layer, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("read busybox (install busybox-static): %w", err)
	}
	out, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list the busybox applets: %w", err)
	}
	files := []tarFile{
		{tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755}, bin},
		{tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, []byte(
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n")},
		{tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("root:x:0:\nnogroup:x:65534:\nsandbox:x:1000:\n")},
		{tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}, nil},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		files = append(files, tarFile{tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil})
	}
	return layer(files)
}

// A tarFile is an entry of a layer, owned by root unless its header says
// otherwise.
type tarFile struct {
	h    tar.Header
	body []byte
}

// layer makes a layer of files, in order.
func layer(files []tarFile) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := f.h
		h.Format, h.Size = tar.FormatPAX, int64(len(f.body))
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// checkBusybox reports why the host's busybox cannot make the test
// images, or nil: it must be the static one, needing no library.
func checkBusybox() error {
	f, err := elf.Open(busyboxPath)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New(busyboxPath + " is not static")
		}
	}
	return nil
}
