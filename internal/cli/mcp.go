package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/internal/mcpserver"
)

func newMCPCmd(e env, cc *clientConfig) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "serve the daemon's MCP tools on stdin and stdout, for MCP clients that start a command",
		Long: `mcp is an MCP server over stdio: a thin bridge to the daemon's /mcp endpoint, offering
its tools (run_code, create_context, stop_context, list_contexts, execute_code,
execute_command, the file and session tools) and forwarding progress and cancellation.
The daemon holds all state, so sessions and contexts outlive the bridge.

The daemon is found as every client command finds it: --url and --token, or
AGENT2ENV_URL / AGENT2ENV_TOKEN (also MSB_SERVER_URL / MSB_API_KEY, SANDBOX_BASE_URL), or
the login file. SANDBOX_TIMEOUT (seconds, or a duration such as 1m30s) is the timeout of
the tool calls that give none, as it is in the SDKs and in sandbox exec, context exec, and
session exec and run without --timeout. When stdin closes, mcp answers the requests it has
read before it exits: it waits at most the longer of SANDBOX_TIMEOUT and 30 seconds, plus
30 seconds, then cancels the rest.`,
		Example: `  agent2env mcp
  # in an MCP client's configuration:
  #   {"mcpServers": {"agent2env": {"command": "agent2env", "args": ["mcp"],
  #                                 "env": {"AGENT2ENV_URL": "http://127.0.0.1:8080"}}}}`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			timeout, err := timeoutFromEnv(e)
			if err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			opts := mcpserver.BridgeOptions{DefaultTimeout: timeout.Seconds(),
				Log: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			return mcpserver.ServeStdio(c.Context(), cl, opts)
		},
	}
}
