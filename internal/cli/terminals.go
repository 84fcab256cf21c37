package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// newSandboxTerminalCmd is the group of a sandbox's persistent terminals,
// which "sandbox shell --name" makes and attaches to.
func newSandboxTerminalCmd(e env, cc *clientConfig) *cobra.Command {
	return group("terminal <command>", "list and end a sandbox's persistent terminals (sandbox shell --name makes and attaches)",
		`  agent2env sandbox shell "$ID" --name work
  agent2env sandbox terminal ls "$ID"
  agent2env sandbox terminal rm "$ID" work`,
		newTerminalListCmd(e, cc), newTerminalRemoveCmd(e, cc))
}

func newTerminalListCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:               "ls ID [flags]",
		Aliases:           []string{"list"},
		Short:             "list a sandbox's persistent terminals",
		Example:           `  agent2env sandbox terminal ls "$ID" -o json`,
		Args:              exactArgs(1, "need a sandbox id"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			ts, err := cl.Sandbox.ListTerminals(ctx, args[0])
			return terminalView(api.TerminalList{Items: ts}, ts), err
		}),
	}
	out.register(c, "table", tableFormats)
	return c
}

// terminalView shows terminals: the API's value v, a table of ts.
func terminalView(v any, ts []api.TerminalInfo) view {
	t := newTable("NAME", "STATUS", "WRITER", "SIZE", "AGE", "COMMAND").withWide("OUTPUT")
	names := make([]string, len(ts))
	for i, ti := range ts {
		names[i] = ti.Name
		status := "running"
		if ti.Exit != nil {
			status = fmt.Sprintf("exited %d", ti.Exit.ExitCode)
		}
		writer := "-"
		if ti.Writer {
			writer = "attached"
		}
		t.add(ti.Name, status, writer, fmt.Sprintf("%dx%d", ti.Cols, ti.Rows), age(ti.StartedAt),
			orDash(strings.Join(ti.Command, " ")), fmt.Sprintf("%d bytes", ti.Output))
	}
	return view{value: v, ids: names, table: t}
}

func newTerminalRemoveCmd(e env, cc *clientConfig) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID NAME... [flags]",
		Aliases: []string{"remove"},
		Short:   "end persistent terminals, with all they started",
		Long: `rm ends persistent terminals of a sandbox, with all their processes started, printing each
one ended. A failure does not stop the others; any makes the exit code 1.`,
		Example:           `  agent2env sandbox terminal rm "$ID" work`,
		Args:              minArgs(2, "need a sandbox id and at least one terminal name"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, false),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			return forEach(e, args[1:], func(name string) error {
				_, err := cl.Sandbox.DeleteTerminal(c.Context(), args[0], name)
				return err
			})
		},
	}
}
