package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newSandboxForkCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		req      api.ForkRequest
		ttl      int
		snapshot bool
		out      output
		c        *cobra.Command
	)
	c = &cobra.Command{
		Use:   "fork ID [flags]",
		Short: "make --count sandboxes, running, from a live snapshot of sandbox ID (which runs on) or from snapshot ID (--snapshot), and print their ids",
		Example: `  agent2env sandbox fork "$ID" --count 8
  agent2env sandbox fork "$SNAP" --snapshot --count 4 -o json`,
		Args:              exactArgs(1, "need one sandbox ID, or snapshot ID with --snapshot"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			if c.Flags().Changed("ttl") {
				req.TTL = &ttl
			}
			fork := cl.Snapshots().ForkSandbox
			if snapshot {
				fork = cl.Snapshots().Fork
			}
			res, err := fork(ctx, args[0], req)
			if err != nil {
				return view{}, err
			}
			sbs := make([]api.Sandbox, len(res.Sandboxes))
			for i, sb := range res.Sandboxes {
				sbs[i] = sb.Sandbox
			}
			// The ids alone, one a line, as sandbox create prints its id.
			v := sandboxView(res, sbs)
			v.text = idText(v.ids...)
			return v, nil
		}),
	}
	f := c.Flags()
	f.IntVar(&req.Count, "count", 1, "how many sandboxes to make (1 to 32)")
	f.IntVar(&ttl, "ttl", 0, "seconds until each sandbox is removed, 0 for never (default: the daemon's)")
	f.BoolVar(&snapshot, "snapshot", false, "ID is a snapshot's (sandbox snapshot create), not a sandbox's")
	out.register(c, "the sandboxes' ids", tableFormats)
	return c
}
