package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// SelfImagePath is where the agent2env image holds the binary; it is the
// image's entrypoint.
const SelfImagePath = "/usr/local/bin/agent2env"

// SelfImageAgentPath is where the agent2env image holds the agent alone
// (cmd/agent2env-agent), which the kubernetes runtime copies into its
// Pods: a fraction of the whole binary's size.
const SelfImageAgentPath = "/usr/local/bin/agent2env-agent"

// selfImageUser is the unprivileged user the image runs as, with a home
// in /etc/passwd (65532, as distroless's nonroot).
const selfImageUser = "65532:65532"

// SelfImageOptions describe the agent2env image beyond its binary.
type SelfImageOptions struct {
	// Agent is the static agent2env-agent binary, stored at
	// SelfImageAgentPath. Required.
	Agent string
	// CACerts is a PEM bundle of the roots the daemon trusts for TLS
	// (its egress and LLM proxies dial out), stored at
	// /etc/ssl/certs/ca-certificates.crt. Required.
	CACerts string
	// Created is the image's creation time and every file's mtime: the
	// commit's time makes the same commit give the same image.
	Created time.Time
	// Version is the org.opencontainers.image.version label.
	Version string
}

// SelfImage returns the agent2env image: one layer holding the static
// binary at SelfImagePath, the agent alone at SelfImageAgentPath, CA
// roots, a passwd with the nonroot user, and /tmp, nothing else. It runs
// as 65532:65532 with the binary as its entrypoint: "serve" for the
// daemon; the kube runtime's Pods copy the agent out of it. The same
// inputs give the same image, digest included.
func SelfImage(binary string, opts SelfImageOptions) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read the agent2env binary: %w", err)
	}
	if opts.Agent == "" {
		return nil, fmt.Errorf("make the agent2env image: no agent2env-agent binary given")
	}
	agentBin, err := os.ReadFile(opts.Agent)
	if err != nil {
		return nil, fmt.Errorf("read the agent2env-agent binary: %w", err)
	}
	if opts.CACerts == "" {
		return nil, fmt.Errorf("make the agent2env image: no CA certificates given")
	}
	certs, err := os.ReadFile(opts.CACerts)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	created := opts.Created.UTC()
	layerTar, err := selfImageLayer(created, bin, agentBin, certs)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{SelfImagePath},
			User:       selfImageUser,
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.title":   "agent2env",
				"org.opencontainers.image.version": opts.Version,
			},
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "agent2env make image"},
	})
}

// selfImageLayer is the image's one layer as an uncompressed tar, every
// entry dated created and owned by root but the nonroot user's home.
func selfImageLayer(created time.Time, bin, agentBin, certs []byte) ([]byte, error) {
	const nonroot = 65532
	entries := []struct {
		name     string
		mode     int64
		owner    int
		contents []byte // nil for a directory
	}{
		{"etc/", 0o755, 0, nil},
		{"etc/passwd", 0o644, 0, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{"etc/group", 0o644, 0, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"etc/ssl/", 0o755, 0, nil},
		{"etc/ssl/certs/", 0o755, 0, nil},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, certs},
		{"home/", 0o755, 0, nil},
		{"home/nonroot/", 0o700, nonroot, nil},
		{"tmp/", 0o1777, 0, nil},
		{"usr/", 0o755, 0, nil},
		{"usr/local/", 0o755, 0, nil},
		{"usr/local/bin/", 0o755, 0, nil},
		{SelfImagePath[1:], 0o755, 0, bin},
		{SelfImageAgentPath[1:], 0o755, 0, agentBin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Typeflag: tar.TypeReg, Mode: e.mode, Size: int64(len(e.contents)),
			Uid: e.owner, Gid: e.owner, ModTime: created, Format: tar.FormatPAX,
		}
		if e.contents == nil {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write the agent2env image layer: %w", err)
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, fmt.Errorf("write the agent2env image layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
