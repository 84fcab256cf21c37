package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/internal/agent"
)

// newAgentCmd runs the in-sandbox agent as the sandbox's first process;
// the runtime starts it, never a person.
func newAgentCmd(e env) *cobra.Command {
	opts := agent.Options{}
	c := &cobra.Command{
		Use:    "agent [flags]",
		Short:  "run the in-sandbox agent (started by the runtime)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Log = slog.New(slog.NewTextHandler(e.stderr, nil))
			return agent.Run(c.Context(), opts)
		},
	}
	c.Flags().IntVar(&opts.UID, "uid", 1000, "user id commands run as (-1: the agent's own)")
	c.Flags().IntVar(&opts.GID, "gid", 1000, "group id commands run as")
	c.Flags().StringVar(&opts.Cwd, "cwd", "/workspace", "default working directory")
	c.Flags().StringVar(&opts.SpareKernel, "spare-kernel", "", "start a kernel of this language at once, for the first kernel request to adopt")
	return c
}
