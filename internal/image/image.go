// Package image is agent2env's content-addressed image store.
//
// A Store keeps OCI images on local disk in the form the oci runtime needs:
// every layer unpacked once into its own directory, keyed by its DiffID,
// with OCI whiteouts already converted to overlayfs whiteouts, so that an
// image's layer directories can be passed as overlayfs lowerdirs as they
// are. Images come from three sources: a registry (Pull), a `docker save`
// tarball or an OCI image layout (Import), and the built-in recipes that
// build a Debian root filesystem with mmdebstrap (Build), which is how the
// python and node images exist on a host that reaches no registry.
//
// Layout of a store's root directory:
//
//	index.json                   refs, image records and layer sizes, replaced atomically
//	blobs/sha256/<hex>           manifests and image configs, verified against their digest
//	layers/sha256/<diffid-hex>/  one unpacked layer, present only once complete
//	tmp/                         downloads and unpacks in flight, emptied by Open
//
// Compressed layer blobs are not kept: once a layer is unpacked and its
// DiffID verified, the directory is the layer.
//
// Built-in images (agent2env/python, node, code-interpreter, agent) are
// recipes of Debian packages; agent2env/agent adds an npm layer, the five
// agent CLIs and Node 22 pinned by agentimage/package-lock.json, which
// AgentCLIs also unpacks on the host for the tests that run the CLIs
// there. Each built layer is cached in the cache dir under the hash of
// its definition, so only a changed definition is built again.
//
// There is one pull or build per ref at a time, shared by every caller
// (flight.go): a caller that gives up leaves it running for the others.
// Operations lists those in flight with their last progress, and the last
// failure of each ref; Follow joins one without starting it. Prebuild is
// the daemon's loop that builds the built-in images its defaults use from
// the start. SelfImage is the agent2env image itself, holding the binary
// and the agent alone (make image, command mkimage).
package image

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Image is one stored image. Images returned by a Store are copies; changing
// one changes nothing in the store.
type Image struct {
	// Ref is the normalized reference, e.g. "docker.io/library/python:3.12",
	// "agent2env/python:latest" for built-ins, or the ID for an image that
	// was imported without a name.
	Ref string
	// Digest is the manifest digest, "sha256:...". Images imported from a
	// `docker save` tarball or built here have no registry manifest; theirs
	// is the digest of an equivalent OCI manifest with uncompressed layers.
	Digest string
	// ID is the config digest.
	ID string
	// Layers are the absolute paths of the unpacked layer directories,
	// lowest first, ready to be overlayfs lowerdirs.
	Layers []string
	// Config is the part of the image config a runtime needs.
	Config Config
	// Size is the number of bytes in the image's regular files.
	Size int64
	// Created is when the image was stored here.
	Created time.Time
}

// Config is the part of an OCI image config that a runtime uses.
type Config struct {
	Env        []string `json:"env,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Progress phases, in the order an operation goes through them.
const (
	PhaseResolve  = "resolve"  // looking up the reference
	PhaseDownload = "download" // fetching a layer; Current/Total are bytes
	PhaseUnpack   = "unpack"   // unpacking a layer; Current is bytes read
	PhaseBuild    = "build"    // building a built-in image; Item is the step
	PhaseDone     = "done"     // the image is stored; Item is its ref
)

// Progress reports how an operation is going.
type Progress struct {
	// Phase is one of the Phase constants.
	Phase string
	// Item is what the phase works on: a layer digest, a build step, a ref.
	Item string
	// Current and Total count bytes in the download and unpack phases.
	// Total is zero when it is not known.
	Current, Total int64
}

// ProgressFunc receives the progress of an operation. Calls for one
// operation never overlap; the function must return quickly and must not
// call back into the Store. It may be nil.
type ProgressFunc func(Progress)

// builtinNamespace is the repository namespace of images built here. Names
// in it are never pulled from a registry.
const builtinNamespace = "agent2env/"

var idPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// reference is a parsed, normalized image reference.
type reference struct {
	// key is the normalized form and the key of the image in the index.
	key string
	// local is set for names in the agent2env namespace and for IDs: they
	// exist only on this host.
	local bool
}

// parseRef normalizes ref: "python:3.12" becomes
// "docker.io/library/python:3.12", "agent2env/python" becomes
// "agent2env/python:latest" and "sha256:<hex>" (an ID) stays as it is.
func parseRef(ref string) (reference, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return reference{}, errdefs.Invalid("empty image reference")
	}
	if idPattern.MatchString(ref) {
		return reference{key: ref, local: true}, nil
	}
	if strings.HasPrefix(ref, builtinNamespace) {
		// Parse only to validate; the registry name.ParseReference would
		// add (docker.io) is exactly what the local namespace is not.
		r, err := name.ParseReference(ref)
		if err != nil {
			return reference{}, errdefs.Invalid("invalid image reference %q: %v", ref, err)
		}
		t, ok := r.(name.Tag)
		if !ok {
			return reference{}, errdefs.Invalid("image %q: built-in images have no digest references", ref)
		}
		return reference{key: t.RepositoryStr() + ":" + t.TagStr(), local: true}, nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return reference{}, errdefs.Invalid("invalid image reference %q: %v", ref, err)
	}
	reg := r.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	sep := ":"
	if _, ok := r.(name.Digest); ok {
		sep = "@"
	}
	return reference{key: reg + "/" + r.Context().RepositoryStr() + sep + r.Identifier()}, nil
}

// remote returns the reference in the form the registry client takes.
func (r reference) remote(insecure map[string]bool) (name.Reference, error) {
	if r.local {
		return nil, errdefs.Invalid("image %s is local to this host and cannot be pulled", r.key)
	}
	var opts []name.Option
	if i := strings.IndexByte(r.key, '/'); i > 0 && insecure[r.key[:i]] {
		opts = append(opts, name.Insecure)
	}
	nr, err := name.ParseReference(r.key, opts...)
	if err != nil {
		return nil, fmt.Errorf("parse reference %s: %w", r.key, err)
	}
	return nr, nil
}

// Normalize returns the normalized form of ref ("python:3.12" →
// "docker.io/library/python:3.12"), or an ErrInvalidArgument when ref is
// not a valid image reference.
func Normalize(ref string) (string, error) {
	r, err := parseRef(ref)
	return r.key, err
}
