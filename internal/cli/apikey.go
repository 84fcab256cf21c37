package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/internal/auth"
)

func newAPIKeyCmd(e env) *cobra.Command {
	return group("apikey <command>", "create an API key for the daemon", "  agent2env apikey create",
		&cobra.Command{
			Use:   "create",
			Short: "print a new API key on stdout, and on stderr how to give it to the daemon",
			Long: `create prints a new random API key on stdout. The daemon accepts it once given the key
(` + auth.EnvKeys + `=<key>) or its hash in a keys file (` + auth.EnvKeysFile + `, one a line).`,
			Example: `  KEY=$(agent2env apikey create)
  sudo ` + auth.EnvKeys + `="$KEY" agent2env serve --listen 0.0.0.0:8080
  agent2env login --url http://host:8080 --token "$KEY"`,
			Args: noArgs,
			RunE: func(*cobra.Command, []string) error {
				// The key alone on stdout, so that KEY=$(agent2env apikey
				// create) takes it; the advice goes to the terminal.
				key := auth.NewKey()
				fmt.Fprintln(e.stdout, key)
				fmt.Fprintf(e.stderr, "Give the daemon the key (%s=<key>) or its hash in a keys file (%s):\n  %s\nClients send it as: Authorization: Bearer <key> (AGENT2ENV_TOKEN for the CLI).\n",
					auth.EnvKeys, auth.EnvKeysFile, auth.Hash(key))
				return nil
			},
		})
}
