package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// Set at build time by the Makefile:
//
//	-ldflags "-X github.com/agent2env/agent2env/internal/cli.version=v1.2.3"
//
// When unset, the module version and VCS revision the Go toolchain
// stamped into the binary are used.
var (
	version string
	commit  string
)

// versionInfo describes one build of agent2env. The daemon's version, when
// it reports one, has the same form (GET /api/v1/version).
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion,omitempty"`
	Platform  string `json:"platform,omitempty"`
}

// buildVersion returns this binary's version.
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		v.Version = cmpOr(v.Version, "unknown")
		return v
	}
	v.Version = cmpOr(v.Version, bi.Main.Version, "unknown")
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

// versions is what "agent2env version -o json" prints.
type versions struct {
	Client versionInfo  `json:"client"`
	Daemon *versionInfo `json:"daemon,omitempty"`
	// DaemonURL is the daemon asked, and DaemonError why it did not say.
	DaemonURL   string `json:"daemonUrl,omitempty"`
	DaemonError string `json:"daemonError,omitempty"`
}

func newVersionCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	var clientOnly bool
	c := &cobra.Command{
		Use:   "version [flags]",
		Short: "print the version of this binary and of the daemon",
		Long: `version prints this binary's version, commit and Go version, and the daemon's version
when it answers GET /api/v1/version.`,
		Example: `  agent2env version
  agent2env version --client -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			v := versions{Client: buildVersion()}
			if !clientOnly {
				v.DaemonURL, v.Daemon, v.DaemonError = daemonVersion(c.Context(), e, cc)
			}
			return out.print(e.stdout, view{value: v, text: v.write})
		},
	}
	out.register(c, "text", valueFormats)
	c.Flags().BoolVar(&clientOnly, "client", false, "print this binary's version only, without asking the daemon")
	return c
}

// daemonVersion asks the daemon for its version. It returns the URL it
// asked and the version, or why there is none.
func daemonVersion(ctx context.Context, e env, cc *clientConfig) (string, *versionInfo, string) {
	s, err := cc.resolve(e)
	if err != nil {
		return "", nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(s.url)+"/api/v1/version", nil)
	if err != nil {
		return s.url, nil, err.Error()
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	req.Header.Set("User-Agent", "agent2env-cli")
	resp, err := (&http.Client{Transport: transport(e, s, cc.debug)}).Do(req)
	if err != nil {
		return s.url, nil, fmt.Sprintf("not reachable: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return s.url, nil, "the daemon answers but does not report its version"
	}
	if resp.StatusCode != http.StatusOK {
		return s.url, nil, fmt.Sprintf("GET /api/v1/version: %s", resp.Status)
	}
	var v versionInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&v); err != nil || v.Version == "" {
		return s.url, nil, "the daemon's answer to GET /api/v1/version has no version"
	}
	return s.url, &v, ""
}

func (v versions) write(w io.Writer) error {
	fmt.Fprintf(w, "Client:\n  Version:     %s\n", v.Client.Version)
	if v.Client.Commit != "" {
		fmt.Fprintf(w, "  Commit:      %s\n", v.Client.Commit)
	}
	fmt.Fprintf(w, "  Go version:  %s\n  Platform:    %s\n", v.Client.GoVersion, v.Client.Platform)
	switch {
	case v.Daemon != nil:
		fmt.Fprintf(w, "Daemon (%s):\n  Version:     %s\n", v.DaemonURL, v.Daemon.Version)
		if v.Daemon.Commit != "" {
			fmt.Fprintf(w, "  Commit:      %s\n", v.Daemon.Commit)
		}
		if v.Daemon.GoVersion != "" {
			fmt.Fprintf(w, "  Go version:  %s\n", v.Daemon.GoVersion)
		}
	case v.DaemonError != "":
		fmt.Fprintf(w, "Daemon (%s): %s\n", orDash(v.DaemonURL), v.DaemonError)
	}
	return nil
}
