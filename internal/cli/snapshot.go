package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newSandboxSnapshotCmd(e env, cc *clientConfig) *cobra.Command {
	return group("snapshot <command>", "save sandboxes with their memory, and list and remove the saves (sandbox create --from-snapshot makes sandboxes of them)",
		`  SNAP=$(agent2env sandbox snapshot create "$ID")
  agent2env sandbox create --from-snapshot "$SNAP"
  agent2env sandbox snapshot rm "$SNAP"`,
		newSnapshotCreateCmd(e, cc), newSnapshotListCmd(e, cc),
		removeCmd(e, cc, "SNAPSHOT", "snapshot id", "remove snapshots and their files",
			`  agent2env sandbox snapshot rm $(agent2env sandbox snapshot ls -q --sandbox "$ID")`, snapshotIDs,
			func(ctx context.Context, cl *client.Client, id string) error { return cl.Snapshots().Delete(ctx, id) }),
	)
}

// snapshotView shows snapshots: the API's value v, a table of snaps.
func snapshotView(v any, snaps []api.Snapshot) view {
	t := newTable("ID", "SANDBOX", "IMAGE", "SIZE", "CPU", "MEMORY", "AGE").withWide("TEMPLATE", "STOPPED", "RUNTIME")
	ids := make([]string, len(snaps))
	for i, s := range snaps {
		ids[i] = s.ID
		stopped := "no"
		if s.Stopped {
			stopped = "yes"
		}
		t.add(s.ID, s.SandboxID, s.Image, formatBytes(s.SizeBytes), s.CPU, s.Memory, age(s.CreatedAt),
			orDash(s.Template), stopped, s.Runtime)
	}
	return view{value: v, ids: ids, table: t}
}

func newSnapshotCreateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		stop bool
		out  output
	)
	c := &cobra.Command{
		Use:   "create ID [flags]",
		Short: "save a running or paused sandbox with its memory (live: it runs on) and print the snapshot's id",
		Example: `  agent2env sandbox snapshot create "$ID"
  agent2env sandbox snapshot create "$ID" --stop -o json`,
		Args:              exactArgs(1, "need one sandbox ID"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			snap, err := cl.Snapshots().Create(ctx, args[0], stop)
			if err != nil {
				return view{}, err
			}
			v := snapshotView(snap, []api.Snapshot{*snap})
			v.text = idText(snap.ID)
			return v, nil
		}),
	}
	c.Flags().BoolVar(&stop, "stop", false, "stop the sandbox once saved, freeing its memory")
	out.register(c, "the snapshot's id", tableFormats)
	return c
}

func newSnapshotListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		sandbox string
		out     output
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list snapshots, newest first",
		Example: `  agent2env sandbox snapshot ls --sandbox "$ID"`,
		Args:    noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			snaps, err := cl.Snapshots().List(ctx, sandbox)
			return snapshotView(api.SnapshotList{Items: snaps}, snaps), err
		}),
	}
	c.Flags().StringVar(&sandbox, "sandbox", "", "list the snapshots of sandbox `ID` only")
	c.RegisterFlagCompletionFunc("sandbox", cc.complete(e, sandboxIDs, true))
	out.register(c, "table", tableFormats)
	return c
}

func snapshotIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	snaps, err := cl.Snapshots().List(ctx, "")
	ids := make([]string, len(snaps))
	for i, s := range snaps {
		ids[i] = s.ID
	}
	return ids, err
}
