package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// newSandboxSnapshotCmd is "sandbox snapshot": snapshots as a verb on a
// sandbox.
func newSandboxSnapshotCmd(e env, cc *clientConfig) *cobra.Command {
	return newSnapshotGroup(e, cc, "sandbox snapshot")
}

// newSnapshotCmd is the top-level "snapshot": snapshots as a resource of
// their own (GET /api/v1/snapshots), the same commands as "sandbox
// snapshot".
func newSnapshotCmd(e env, cc *clientConfig) *cobra.Command {
	return newSnapshotGroup(e, cc, "snapshot")
}

// newSnapshotGroup makes the snapshot commands under path (what the
// examples call them by).
func newSnapshotGroup(e env, cc *clientConfig, path string) *cobra.Command {
	return group("snapshot <command>", "save sandboxes with their memory, and list and remove the saves (sandbox create --from-snapshot makes sandboxes of them)",
		fmt.Sprintf(`  SNAP=$(agent2env %[1]s create "$ID")
  agent2env sandbox create --from-snapshot "$SNAP"
  agent2env %[1]s rm "$SNAP"`, path),
		newSnapshotCreateCmd(e, cc, path), newSnapshotListCmd(e, cc, path),
		removeCmd(e, cc, "SNAPSHOT", "snapshot id", "remove snapshots and their files",
			fmt.Sprintf(`  agent2env %[1]s ls -q --sandbox "$ID" | xargs -r agent2env %[1]s rm`, path), snapshotIDs,
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

func newSnapshotCreateCmd(e env, cc *clientConfig, path string) *cobra.Command {
	var (
		stop bool
		out  output
	)
	c := &cobra.Command{
		Use:   "create ID [flags]",
		Short: "save a running or paused sandbox with its memory (live: it runs on) and print the snapshot's id",
		Example: fmt.Sprintf(`  agent2env %[1]s create "$ID"
  agent2env %[1]s create "$ID" --stop -o json`, path),
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

func newSnapshotListCmd(e env, cc *clientConfig, path string) *cobra.Command {
	var (
		opts client.ListSnapshotsOptions
		page pageFlags
		out  output
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list snapshots, newest first (or oldest first)",
		Example: fmt.Sprintf(`  agent2env %[1]s ls --sandbox "$ID"
  agent2env %[1]s ls --limit 100 --cursor "$NEXT" -o json`, path),
		Args: noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			opts.Limit, opts.Cursor, opts.Order = int(page.limit), page.cursor, page.order()
			l, err := cl.Snapshots().ListPage(ctx, opts)
			if err != nil {
				return view{}, err
			}
			return snapshotView(l, l.Items), nil
		}),
	}
	c.Flags().StringVar(&opts.SandboxID, "sandbox", "", "list the snapshots of sandbox `ID` only")
	page.register(c, "snapshots", "next_cursor", true)
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
