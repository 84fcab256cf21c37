package oci

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"runtime/debug"
)

// agentBesideName is the agent alone (cmd/agent2env-agent), which make
// build and the agent2env image put beside agent2env.
const agentBesideName = "agent2env-agent"

// agentBeside returns the agent2env-agent binary beside the executable
// exe when it was built from the same source as exe, or "" (then the
// sandboxes run exe itself as "agent2env agent"). Idle, it holds some
// 1.3 MiB of heap against the whole binary's 7 MiB — every package's
// init data — in each of the host's sandboxes. Same source: the same
// VCS revision and state, and a file no older than exe (a daemon
// rebuilt alone, the agent left behind from an earlier build, would
// run an agent of other code).
func agentBeside(exe string) string {
	agent := filepath.Join(filepath.Dir(exe), agentBesideName)
	ai, err := os.Stat(agent)
	if err != nil || !ai.Mode().IsRegular() {
		return ""
	}
	ei, err := os.Stat(exe)
	if err != nil || ai.ModTime().Before(ei.ModTime()) {
		return ""
	}
	want, err := buildinfo.ReadFile(exe)
	if err != nil {
		return ""
	}
	got, err := buildinfo.ReadFile(agent)
	if err != nil || want.GoVersion != got.GoVersion || vcs(want) != vcs(got) {
		return ""
	}
	return agent
}

// vcs is the revision and state a binary was built from, "" when the
// build recorded none.
func vcs(info *debug.BuildInfo) [3]string {
	var v [3]string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v[0] = s.Value
		case "vcs.time":
			v[1] = s.Value
		case "vcs.modified":
			v[2] = s.Value
		}
	}
	return v
}
