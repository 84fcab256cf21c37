// Command agent2env is the agent2env daemon, its CLI client and the agent
// that runs inside every sandbox, in one binary.
package main

import (
	"context"
	"os"

	"github.com/agent2env/agent2env/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext(context.Background())
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
