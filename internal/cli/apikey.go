package cli

import (
	"context"
	"fmt"

	"github.com/agent2env/agent2env/internal/auth"
)

// apikeyCmd makes API keys for the daemon.
type apikeyCmd struct{ env }

func (c *apikeyCmd) Run(ctx context.Context, args []string) error {
	fs := newFlags(c.env, "apikey", "apikey create")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "create" {
		fs.Usage()
		return fmt.Errorf("%w: want: apikey create", errUsage)
	}
	key := auth.NewKey()
	fmt.Fprintln(c.stdout, key)
	fmt.Fprintf(c.stderr, "Give the daemon the key (%s=<key>) or its hash in a keys file (%s):\n  %s\nClients send it as: Authorization: Bearer <key> (AGENT2ENV_TOKEN for the CLI).\n",
		auth.EnvKeys, auth.EnvKeysFile, auth.Hash(key))
	return nil
}
