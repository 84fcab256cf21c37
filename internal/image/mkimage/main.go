// Command mkimage writes the agent2env image (see image.SelfImage) as a
// `docker save` tarball, which docker load, podman load, skopeo, crane
// push, ctr import, kind load and agent2env image import all read:
//
//	go run ./internal/image/mkimage -binary bin/agent2env -agent bin/agent2env-agent -o bin/agent2env-image.tar \
//		-tag agent2env/agent2env:v1 -tag agent2env/agent2env:latest
//
// make image runs it. -created (Unix seconds, default $SOURCE_DATE_EPOCH
// or 0) dates the image and its files, so one commit gives one digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/agent2env/agent2env/internal/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

type tags []string

func (t *tags) String() string     { return strings.Join(*t, ",") }
func (t *tags) Set(s string) error { *t = append(*t, s); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	binary := fs.String("binary", "bin/agent2env", "the static agent2env binary")
	agentBin := fs.String("agent", "bin/agent2env-agent", "the static agent2env-agent binary (cmd/agent2env-agent)")
	out := fs.String("o", "bin/agent2env-image.tar", "the tarball to write")
	certs := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA roots to include")
	version := fs.String("version", "dev", "the image's version label")
	created := fs.Int64("created", epoch(), "creation time, Unix seconds")
	var refs tags
	fs.Var(&refs, "tag", "a name:tag for the image (repeatable; default agent2env/agent2env:latest)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(refs) == 0 {
		refs = tags{"agent2env/agent2env:latest"}
	}
	img, err := image.SelfImage(*binary, image.SelfImageOptions{
		Agent: *agentBin, CACerts: *certs, Created: time.Unix(*created, 0), Version: *version,
	})
	if err != nil {
		return err
	}
	named := map[name.Tag]v1.Image{}
	for _, r := range refs {
		tag, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("tag %q: %w", r, err)
		}
		named[tag] = img
	}
	tmp := *out + ".tmp"
	if err := tarball.MultiWriteToFile(tmp, named); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", *out, err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (%s)\n", *out, digest, refs.String())
	return nil
}

// epoch is $SOURCE_DATE_EPOCH, the reproducible-builds convention, or 0.
func epoch() int64 {
	n, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	return n
}
