package template

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/quantity"
)

// Defaults applied to every spec that is stored, as LiteBoxd applies them.
const (
	DefaultCPU              = "500m"
	DefaultMemory           = "512Mi"
	DefaultStartupTimeout   = 300
	DefaultProbePeriod      = 10
	DefaultFailureThreshold = 3

	DefaultPersistenceMode = "rootfs-overlay"
	DefaultPersistenceSize = "1Gi"
	ReclaimDelete          = "Delete"
	ReclaimRetain          = "Retain"
	// MinPersistenceBytes is the smallest persistence size: the smallest
	// disk an ext4 file system with room for files fits on.
	MinPersistenceBytes = 16 << 20
)

// objectNamePattern is a Kubernetes object name (a DNS subdomain): what
// storage and runtime classes are named.
var objectNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// checkObjectName checks the name of a Kubernetes object the spec names.
func checkObjectName(name string) error {
	if len(name) > 253 || !objectNamePattern.MatchString(name) {
		return fmt.Errorf("%q is not a Kubernetes object name (lowercase letters, digits, '-' and '.', at most 253)", name)
	}
	return nil
}

// maxSeconds is the largest duration in seconds a time.Duration holds
// (about 292 years): TTLs and timeouts beyond it would overflow.
const maxSeconds = int(math.MaxInt64 / int64(time.Second))

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ValidateName checks a template name: a DNS label of 1 to 63 lowercase
// letters, digits and hyphens.
func ValidateName(name string) error {
	if len(name) < 1 || len(name) > 63 {
		return errdefs.Invalid("invalid name: name must be between 1 and 63 characters")
	}
	if !namePattern.MatchString(name) {
		return errdefs.Invalid("invalid name: name must consist of lowercase letters, numbers, and hyphens, " +
			"and must start and end with a letter or number")
	}
	return nil
}

// ValidateSpec checks spec and returns it as it is stored: defaults
// applied, allowed domains normalized, empty lists and maps made nil. spec
// itself is not modified. Errors are ErrInvalidArgument, their message
// starting "invalid spec: ".
func ValidateSpec(spec api.TemplateSpec) (api.TemplateSpec, error) {
	out, err := checkSpec(spec)
	if err != nil {
		return api.TemplateSpec{}, errdefs.Invalid("invalid spec: %s", err)
	}
	if b, _ := json.Marshal(out); len(b) > MaxSpecBytes {
		return api.TemplateSpec{}, errdefs.Invalid("invalid spec: %d bytes as JSON; a spec has at most %d, whichever way it comes", len(b), MaxSpecBytes)
	}
	return out, nil
}

// MaxSpecBytes bounds a spec as JSON: one bound for every way a template
// comes (JSON, YAML import), so that what is stored can be sent back in a
// request of the API's largest JSON body (1 MiB) with room for the rest.
const MaxSpecBytes = 960 << 10

func checkSpec(in api.TemplateSpec) (api.TemplateSpec, error) {
	s := api.TemplateSpec{
		Image:          strings.TrimSpace(in.Image),
		Command:        cloneStrings(in.Command),
		Args:           cloneStrings(in.Args),
		Resources:      in.Resources,
		TTL:            in.TTL,
		StartupScript:  in.StartupScript,
		StartupTimeout: in.StartupTimeout,
	}
	if in.RuntimeClassName != "" {
		if err := checkObjectName(in.RuntimeClassName); err != nil {
			return s, fmt.Errorf("runtimeClassName: %v", err)
		}
		s.RuntimeClassName = in.RuntimeClassName
	}
	if s.Image == "" {
		return s, fmt.Errorf("image is required")
	}
	if _, err := image.Normalize(s.Image); err != nil {
		return s, err
	}

	if s.Resources.CPU == "" {
		s.Resources.CPU = DefaultCPU
	}
	if s.Resources.Memory == "" {
		s.Resources.Memory = DefaultMemory
	}
	milli, err := quantity.ParseCPU(s.Resources.CPU)
	if err != nil {
		return s, fmt.Errorf("resources: %v", err)
	}
	if milli < quantity.MinMilliCPU {
		// "0.0001" parses but rounds to 0, which runtimes take as no
		// limit; below 10m they refuse to start the sandbox.
		return s, fmt.Errorf("resources: cpu %s is below the %dm minimum", s.Resources.CPU, quantity.MinMilliCPU)
	}
	mem, err := quantity.ParseBytes(s.Resources.Memory)
	if err != nil {
		return s, fmt.Errorf("resources: memory: %v", err)
	}
	if mem < quantity.MinBytes {
		return s, fmt.Errorf("resources: memory %s is below the 16Mi minimum", s.Resources.Memory)
	}

	if s.TTL < 0 {
		return s, fmt.Errorf("ttl must be >= 0 (0 means never expire)")
	}
	if s.TTL > maxSeconds {
		return s, fmt.Errorf("ttl %d is above the maximum of %d seconds", s.TTL, maxSeconds)
	}
	if s.StartupTimeout < 0 || s.StartupTimeout > maxSeconds {
		return s, fmt.Errorf("startupTimeout %d is out of range (0 means the default, %d)", s.StartupTimeout, DefaultStartupTimeout)
	}
	if s.StartupTimeout == 0 {
		s.StartupTimeout = DefaultStartupTimeout
	}

	if err := checkArgv("command and args", append(slices.Clone(s.Command), s.Args...)); err != nil {
		return s, err
	}
	if strings.ContainsRune(s.StartupScript, 0) {
		// The script is the argument of sh -c, which no NUL can be in: the
		// sandbox would fail to start.
		return s, fmt.Errorf("startupScript contains NUL, which a shell script cannot hold")
	}

	if len(in.Env) > 0 {
		s.Env = make(map[string]string, len(in.Env))
		for k, v := range in.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return s, fmt.Errorf("env %q: names must be non-empty without '=' or NUL, values without NUL", k)
			}
			s.Env[k] = v
		}
	}

	dests := make(map[string]int, len(in.Files))
	for i, f := range in.Files {
		if f.Destination == "" {
			return s, fmt.Errorf("files[%d]: destination is required", i)
		}
		if strings.ContainsRune(f.Destination, 0) || slices.Contains(strings.Split(f.Destination, "/"), "..") {
			return s, fmt.Errorf("files[%d]: destination %q must not contain NUL or '..'", i, f.Destination)
		}
		if len(f.Destination) > maxPath {
			return s, fmt.Errorf("files[%d]: destination is %d bytes long; at most %d", i, len(f.Destination), maxPath)
		}
		// A directory's name (the sandbox manager cleans the path, which
		// would make "/etc/" the directory /etc) can take no file.
		if strings.HasSuffix(f.Destination, "/") || path.Base(f.Destination) == "." {
			return s, fmt.Errorf("files[%d]: destination %q names a directory, not a file", i, f.Destination)
		}
		dest := path.Clean(f.Destination)
		if j, dup := dests[dest]; dup {
			return s, fmt.Errorf("files[%d]: destination %q is files[%d]'s too", i, f.Destination, j)
		}
		dests[dest] = i
		if (f.Content == "") == (f.Source == "") {
			return s, fmt.Errorf("files[%d] (%s): exactly one of content and source is required", i, f.Destination)
		}
		if f.Source != "" {
			// The sandbox manager fetches sources over HTTP, nothing else.
			u, err := url.Parse(f.Source)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return s, fmt.Errorf("files[%d] (%s): source %q is not an http(s) URL", i, f.Destination, f.Source)
			}
		}
		s.Files = append(s.Files, f)
	}

	if p := in.ReadinessProbe; p != nil {
		if len(p.Exec.Command) == 0 {
			return s, fmt.Errorf("readinessProbe: exec.command is required")
		}
		if err := checkArgv("readinessProbe: exec.command", p.Exec.Command); err != nil {
			return s, err
		}
		if p.InitialDelaySeconds < 0 || p.PeriodSeconds < 0 || p.FailureThreshold < 0 {
			return s, fmt.Errorf("readinessProbe: initialDelaySeconds, periodSeconds and failureThreshold must be >= 0")
		}
		if p.InitialDelaySeconds > maxSeconds || p.PeriodSeconds > maxSeconds {
			return s, fmt.Errorf("readinessProbe: delays must be at most %d seconds", maxSeconds)
		}
		probe := *p
		probe.Exec.Command = cloneStrings(p.Exec.Command)
		if probe.PeriodSeconds == 0 {
			probe.PeriodSeconds = DefaultProbePeriod
		}
		if probe.FailureThreshold == 0 {
			probe.FailureThreshold = DefaultFailureThreshold
		}
		s.ReadinessProbe = &probe
	}

	if in.Network != nil {
		n, err := NormalizeNetwork(in.Network)
		if err != nil {
			return s, err
		}
		s.Network = n
	}

	if p := in.Persistence; p != nil {
		persist := *p
		if persist.Enabled {
			if persist.Mode == "" {
				persist.Mode = DefaultPersistenceMode
			}
			if persist.Mode != DefaultPersistenceMode {
				return s, fmt.Errorf("persistence: mode %q is not supported (only %s)", persist.Mode, DefaultPersistenceMode)
			}
			if persist.Size == "" {
				persist.Size = DefaultPersistenceSize
			}
			size, err := quantity.ParseBytes(persist.Size)
			if err != nil {
				return s, fmt.Errorf("persistence: %v", err)
			}
			if size < MinPersistenceBytes {
				return s, fmt.Errorf("persistence: size %s is below the 16Mi minimum", persist.Size)
			}
			if persist.StorageClassName != "" {
				if err := checkObjectName(persist.StorageClassName); err != nil {
					return s, fmt.Errorf("persistence: storageClassName: %v", err)
				}
			}
			if persist.ReclaimPolicy == "" {
				persist.ReclaimPolicy = ReclaimDelete
			}
			if persist.ReclaimPolicy != ReclaimDelete && persist.ReclaimPolicy != ReclaimRetain {
				return s, fmt.Errorf("persistence: reclaimPolicy %q must be %s or %s", persist.ReclaimPolicy, ReclaimDelete, ReclaimRetain)
			}
		}
		s.Persistence = &persist
	}
	return s, nil
}

// maxPath is the longest file destination, as the sandbox manager takes
// paths: PATH_MAX less its NUL.
const maxPath = 4095

// checkArgv checks a command line a sandbox runs, named what: a program
// to run first (when there is anything), and no NUL, which no argument
// of a process can hold.
func checkArgv(what string, argv []string) error {
	if len(argv) > 0 && argv[0] == "" {
		return fmt.Errorf("%s: the program, the first, is empty", what)
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%s: [%d] contains NUL", what, i)
		}
	}
	return nil
}

// NormalizeNetwork checks network spec n, a template's or a sandbox's,
// and returns it with its domains normalized (normalizeDomains).
func NormalizeNetwork(n *api.NetworkSpec) (*api.NetworkSpec, error) {
	domains, err := normalizeDomains(n.AllowedDomains)
	if err != nil {
		return nil, fmt.Errorf("network: %v", err)
	}
	return &api.NetworkSpec{AllowInternetAccess: n.AllowInternetAccess, AllowedDomains: domains}, nil
}

// normalizeDomains lower-cases and trims the allowed domains, drops a
// trailing dot, empty entries and duplicates, and rejects what is not a host name
// pattern: a "*." wildcard is allowed only as a prefix.

func normalizeDomains(in []string) ([]string, error) {
	var out []string
	for _, d := range in {
		d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		if d == "" {
			continue
		}
		if strings.Contains(d, "://") || strings.ContainsAny(d, "/:") {
			return nil, fmt.Errorf("allowedDomains: %q must be a domain name, without scheme, port or path", d)
		}
		if strings.Contains(strings.TrimPrefix(d, "*."), "*") {
			return nil, fmt.Errorf("allowedDomains: %q: a wildcard is allowed only as a \"*.\" prefix", d)
		}
		if d == "*." {
			return nil, fmt.Errorf("allowedDomains: %q has no domain after the wildcard", d)
		}
		if !DomainPattern(d) {
			return nil, fmt.Errorf("allowedDomains: %q: want a domain name (labels of letters, digits, '-' and '_' joined by dots) or a \"*.\" wildcard of one", d)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// DomainPattern reports whether t is a name the egress proxy can match: a
// DNS name (an IPv4 address is one too) of at most 253 bytes, its labels
// of 1 to 63 letters, digits, '-' or '_', or "*." and such a name.
func DomainPattern(t string) bool {
	name := strings.TrimSuffix(strings.TrimPrefix(t, "*."), ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// cloneStrings copies s; empty becomes nil.
func cloneStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
