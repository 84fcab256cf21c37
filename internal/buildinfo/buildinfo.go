// Package buildinfo tells which build of agent2env is running: the version
// and commit the Makefile stamps in, else what the Go toolchain recorded.
// The CLI prints it and the daemon serves it at GET /api/v1/version.
package buildinfo

import (
	"cmp"
	"runtime"
	"runtime/debug"

	"github.com/agent2env/agent2env/api"
)

// Set at build time by the Makefile:
//
//	-ldflags "-X github.com/agent2env/agent2env/internal/buildinfo.version=v1.2.3"
//
// When unset, the module version and VCS revision the Go toolchain
// stamped into the binary are used.
var (
	version string
	commit  string
)

// Get returns this binary's version.
func Get() api.Version {
	v := api.Version{Version: version, Commit: commit, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		v.Version = cmp.Or(v.Version, "unknown")
		return v
	}
	v.Version = cmp.Or(v.Version, bi.Main.Version, "unknown")
	if v.Commit == "" {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && v.Commit != "" {
			v.Commit += "-dirty"
		}
	}
	return v
}
