package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/buildinfo"
)

// versions is what "agent2env version -o json" prints.
type versions struct {
	Client api.Version  `json:"client"`
	Daemon *api.Version `json:"daemon,omitempty"`
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
			v := versions{Client: buildinfo.Get()}
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
func daemonVersion(ctx context.Context, e env, cc *clientConfig) (string, *api.Version, string) {
	s, err := cc.resolve(e)
	if err != nil {
		return "", nil, err.Error()
	}
	c, err := newClient(e, s, cc.debug)
	if err != nil {
		return s.url, nil, err.Error()
	}
	// version answers even when the daemon does not: a daemon that takes
	// longer than this is reported, not waited for.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.Version(ctx)
	switch {
	case errors.Is(err, client.ErrNotFound): // a daemon from before the endpoint
		return s.url, nil, "the daemon answers but does not report its version"
	case err != nil:
		if apiErr := (*client.APIError)(nil); errors.As(err, &apiErr) {
			return s.url, nil, apiErr.Error()
		}
		return s.url, nil, "not reachable: " + errors.Unwrap(err).Error()
	case v.Version == "":
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
