package session

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
)

// Flavor is a size of session sandbox.
type Flavor struct {
	Name   string
	CPU    string // a Kubernetes quantity: "1", "500m"
	Memory string // "1Gi"
}

// DefaultFlavors are small, medium and large; Config.Flavors adds to them
// or replaces them by name.
var DefaultFlavors = []Flavor{
	{Name: api.FlavorSmall, CPU: "1", Memory: "1Gi"},
	{Name: api.FlavorMedium, CPU: "2", Memory: "2Gi"},
	{Name: api.FlavorLarge, CPU: "4", Memory: "4Gi"},
}

// Config configures the service. The zero value is the defaults.
type Config struct {
	// Flavors are added to (or replace, by name) DefaultFlavors.
	Flavors []Flavor
	// DefaultFlavor is a new session's flavor when the request names
	// none (default small; env MSB_DEFAULT_FLAVOR).
	DefaultFlavor string
	// PoolCPU and PoolMemory are the limits of the warm pools' sandboxes
	// (the manager's defaults, default "1" and "1Gi"): a session of a
	// flavor with these limits may take one.
	PoolCPU, PoolMemory string
	// IdleTimeout is how long a session lives after its last request
	// (default 30 minutes; env MSB_SESSION_TIMEOUT).
	IdleTimeout time.Duration
	// MaxIdleTimeout bounds the idle timeout a keep-alive may set
	// (default 24 hours).
	MaxIdleTimeout time.Duration
	// MaxLifetime bounds a session's life however it is used (default
	// 24 hours; negative for none).
	MaxLifetime time.Duration
	// ReapInterval is the period of Run's reaping (default 30 s).
	ReapInterval time.Duration
	// PauseAfter, when positive, pauses the sandbox of a session idle this
	// long (the manager's Pause: frozen in memory, using no CPU), at the
	// reaping after it passes, and the session's next request resumes it.
	// Zero (the default) never pauses.
	PauseAfter time.Duration
	// OrphanGrace is how old a sandbox a service made must be before it
	// counts as an orphan when nothing refers to it (default 5 minutes).
	OrphanGrace time.Duration
	// FailedRetention is how long failed sandboxes a service made are
	// kept, for their history (default 1 hour).
	FailedRetention time.Duration
	// Volumes are host directories mounted into every session's sandbox
	// (env MSB_SHARED_VOLUME_PATH).
	Volumes []Volume
}

func (c *Config) setDefaults() error {
	byName := map[string]Flavor{}
	for _, f := range append(append([]Flavor(nil), DefaultFlavors...), c.Flavors...) {
		if f.Name == "" {
			return errdefs.Invalid("a flavor needs a name")
		}
		if _, err := quantity.ParseCPU(f.CPU); err != nil {
			return errdefs.Invalid("flavor %s: cpu: %v", f.Name, err)
		}
		if _, err := quantity.ParseBytes(f.Memory); err != nil {
			return errdefs.Invalid("flavor %s: memory: %v", f.Name, err)
		}
		byName[f.Name] = f
	}
	c.Flavors = c.Flavors[:0]
	for _, f := range byName {
		c.Flavors = append(c.Flavors, f)
	}
	sort.Slice(c.Flavors, func(i, j int) bool { return c.Flavors[i].Name < c.Flavors[j].Name })
	if c.DefaultFlavor == "" {
		c.DefaultFlavor = api.FlavorSmall
	}
	if _, ok := byName[c.DefaultFlavor]; !ok {
		return errdefs.Invalid("default flavor %q is not one of %s", c.DefaultFlavor, c.flavorNames())
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&c.IdleTimeout, 30 * time.Minute}, {&c.MaxIdleTimeout, 24 * time.Hour}, {&c.MaxLifetime, 24 * time.Hour},
		{&c.ReapInterval, 30 * time.Second}, {&c.OrphanGrace, 5 * time.Minute}, {&c.FailedRetention, time.Hour},
	}
	for _, d := range defaults {
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	if c.MaxLifetime < 0 {
		c.MaxLifetime = 0
	}
	if c.PauseAfter < 0 {
		return errdefs.Invalid("session pause-after %v must not be negative", c.PauseAfter)
	}
	if c.IdleTimeout < 0 || c.IdleTimeout > c.MaxIdleTimeout {
		return errdefs.Invalid("session idle timeout %v must be between 0 and %v", c.IdleTimeout, c.MaxIdleTimeout)
	}
	if c.PoolCPU == "" {
		c.PoolCPU = "1"
	}
	if c.PoolMemory == "" {
		c.PoolMemory = "1Gi"
	}
	for _, v := range c.Volumes {
		if err := v.check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) flavorNames() string {
	names := make([]string, 0, len(c.Flavors))
	for _, f := range c.Flavors {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// flavor returns the flavor called name, or the default for "".
func (c *Config) flavor(name string) (Flavor, error) {
	if name == "" {
		name = c.DefaultFlavor
	}
	for _, f := range c.Flavors {
		if f.Name == name {
			return f, nil
		}
	}
	return Flavor{}, errdefs.Invalid("flavor %q is not one of %s", name, c.flavorNames())
}

// Environment variables of the daemon's session configuration, the names
// clients of the sessions API already use (MSB_*).
const (
	EnvDefaultFlavor  = "MSB_DEFAULT_FLAVOR"
	EnvSessionTimeout = "MSB_SESSION_TIMEOUT"
	EnvSharedVolumes  = "MSB_SHARED_VOLUME_PATH"
)

// ApplyEnv sets the fields of c that are still zero from the environment,
// as lookup (os.LookupEnv) reads it: MSB_DEFAULT_FLAVOR,
// MSB_SESSION_TIMEOUT (seconds, or a duration such as "45m") and
// MSB_SHARED_VOLUME_PATH (see ParseVolumes).
func ApplyEnv(c *Config, lookup func(string) (string, bool)) error {
	if v, ok := lookup(EnvDefaultFlavor); ok && v != "" && c.DefaultFlavor == "" {
		c.DefaultFlavor = strings.TrimSpace(v)
	}
	if v, ok := lookup(EnvSessionTimeout); ok && v != "" && c.IdleTimeout == 0 {
		d, err := ParseTimeout(v)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvSessionTimeout, err)
		}
		c.IdleTimeout = d
	}
	if v, ok := lookup(EnvSharedVolumes); ok && v != "" && len(c.Volumes) == 0 {
		vols, err := ParseVolumes(v)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvSharedVolumes, err)
		}
		c.Volumes = vols
	}
	return nil
}

// ParseTimeout reads a timeout given in seconds ("1800", "2.5") or as a
// duration ("30m").
func ParseTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs <= 0 || secs > (1<<62)/float64(time.Second) {
			return 0, errdefs.Invalid("timeout %q must be positive", s)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errdefs.Invalid("timeout %q is neither seconds nor a positive duration such as 30m", s)
	}
	return d, nil
}

// Volume is a host directory mounted into session sandboxes at Guest. By
// default each session sees only its own subdirectory of it; Common
// mounts the whole directory into every session.
type Volume struct {
	Host     string
	Guest    string
	Common   bool
	ReadOnly bool
}

// ParseVolumes reads MSB_SHARED_VOLUME_PATH as the microsandbox MCP
// wrapper does: a JSON array of "host:guest" strings, or a comma-separated
// list of them. agent2env adds options after a third ':' ("common", "ro",
// joined with '+'): "/srv/data:/data:common+ro".
func ParseVolumes(s string) ([]Volume, error) {
	var items []string
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal([]byte(t), &items); err != nil {
			return nil, errdefs.Invalid("shared volumes %q: a JSON array of \"host:guest\" strings: %v", s, err)
		}
	} else {
		items = strings.Split(t, ",")
	}
	var out []Volume
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, errdefs.Invalid("shared volume %q is not host:guest[:options]", item)
		}
		v := Volume{Host: parts[0], Guest: parts[1]}
		if len(parts) == 3 {
			for _, opt := range strings.Split(parts[2], "+") {
				switch opt {
				case "common":
					v.Common = true
				case "ro":
					v.ReadOnly = true
				case "rw", "session":
				default:
					return nil, errdefs.Invalid("shared volume %q: option %q is not common, session, ro or rw", item, opt)
				}
			}
		}
		if err := v.check(); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// check refuses volume paths that are relative or step up with "..".
func (v Volume) check() error {
	for _, p := range []string{v.Host, v.Guest} {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return errdefs.Invalid("shared volume %s:%s: paths must be absolute, clean (no '..') and not /", v.Host, v.Guest)
		}
	}
	return nil
}
