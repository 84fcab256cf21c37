// Command mcpstdio serves agent2env's MCP tools on stdio as a bridge to
// the daemon AGENT2ENV_URL (MSB_SERVER_URL, SANDBOX_BASE_URL) names, as
// `agent2env mcp` does: the end-to-end tests drive it with stock MCP
// clients until the CLI has that command.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/mcpserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := client.FromEnv()
	if err == nil {
		timeout, _ := client.TimeoutFromEnv()
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		err = mcpserver.ServeStdio(ctx, c, mcpserver.BridgeOptions{DefaultTimeout: timeout, Log: log})
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "mcpstdio:", err)
		os.Exit(1)
	}
}
