package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/prepull"
)

func newPrepullCmd(e env, cc *clientConfig) *cobra.Command {
	return group("prepull <command>", "fetch images before sandboxes need them",
		`  agent2env prepull create python:3.12 --wait
  agent2env prepull create --template python-ds
  agent2env prepull ls --status failed`,
		newPrepullCreateCmd(e, cc), newPrepullListCmd(e, cc), newPrepullGetCmd(e, cc),
		removeCmd(e, cc, "ID", "task ID", "remove prepull tasks, cancelling active pulls",
			"  agent2env prepull ls -q --status failed | xargs -r agent2env prepull rm", prepullIDs,
			func(ctx context.Context, cl *client.Client, id string) error { return cl.Prepull.Delete(ctx, id) }),
	)
}

// prepullView shows prepull tasks: the API's value v, a table of tasks.
func prepullView(v any, tasks []api.PrepullTask) view {
	t := newTable("ID", "IMAGE", "STATUS", "PROGRESS", "TEMPLATE", "AGE", "ERROR").withWide("COMPLETED")
	ids := make([]string, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
		progress := "-"
		if task.Progress.Total > 0 {
			progress = fmt.Sprintf("%d/%d", task.Progress.Ready, task.Progress.Total)
		}
		completed := "-"
		if task.CompletedAt != nil {
			completed = age(*task.CompletedAt)
		}
		t.add(task.ID, task.Image, task.Status, progress, orDash(task.Template), age(task.StartedAt), oneLine(task.Error), completed)
	}
	return view{value: v, ids: ids, table: t}
}

func newPrepullCreateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		template string
		timeout  time.Duration
		wait     bool
		out      output
	)
	c := &cobra.Command{
		Use:   "create IMAGE|--template NAME [flags]",
		Short: "start fetching an image before sandboxes need it",
		Example: `  agent2env prepull create python:3.12 --timeout 1200 --wait
  agent2env prepull create --template python-ds`,
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case template == "" && len(args) != 1:
				return usageErrorf(c, "need one IMAGE or --template NAME")
			case template != "" && len(args) > 0:
				return usageErrorf(c, "give an IMAGE or --template NAME, not both")
			case template != "" && timeout != 0:
				return usageErrorf(c, "--timeout applies to an IMAGE only")
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			var task *api.PrepullTask
			if template != "" {
				task, err = cl.Prepull.CreateForTemplate(c.Context(), template)
			} else {
				// The daemon caps a timeout at its maximum, and counts
				// whole seconds.
				secs := min(seconds(timeout), int(prepull.MaxTimeout/time.Second))
				task, err = cl.Prepull.Create(c.Context(), args[0], time.Duration(secs)*time.Second)
			}
			if err != nil {
				return err
			}
			// A failed task is still printed, so that scripts can see and
			// remove it.
			var failed error
			if wait && task.Status != api.PrepullCompleted {
				done, err := cl.Prepull.WaitForCompletion(c.Context(), task.ID, e.poll)
				if done == nil {
					return err
				}
				task, failed = done, err
			}
			if err := out.print(e.stdout, prepullView(task, []api.PrepullTask{*task})); err != nil {
				return err
			}
			return failed
		},
	}
	f := c.Flags()
	f.StringVar(&template, "template", "", "prepull the image of the latest version of template `NAME`")
	timeoutVar(f, &timeout, "`SECONDS` (or a duration such as 20m) before the pull fails (default: the daemon's, 600)")
	f.BoolVar(&wait, "wait", false, "wait until the pull completes; fail with the reason if it fails")
	c.RegisterFlagCompletionFunc("template", cc.complete(e, templateNames, true))
	out.register(c, "table", tableFormats)
	return c
}

// prepullStatuses are the statuses ls --status accepts.
var prepullStatuses = []string{api.PrepullPending, api.PrepullPulling, api.PrepullCompleted, api.PrepullFailed}

func newPrepullListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		image, status string
		out           output
		page          pageFlags
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list prepull tasks, newest first (or oldest first)",
		Example: `  agent2env prepull ls --image python:3.12
  agent2env prepull ls -o json --limit 20
  agent2env prepull ls -q --status failed | xargs -r agent2env prepull rm`,
		Args: noArgs,
		PreRunE: func(c *cobra.Command, _ []string) error {
			if status != "" && !slices.Contains(prepullStatuses, status) {
				return usageErrorf(c, "--status %q: want pending, pulling, completed or failed", status)
			}
			return nil
		},
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			l, err := cl.Prepull.ListPage(ctx, client.ListPrepullsOptions{Image: image, Status: status,
				Limit: int(page.limit), Cursor: page.cursor, Order: page.order()})
			if err != nil {
				return view{}, err
			}
			return prepullView(l, l.Items), nil
		}),
	}
	page.register(c, "tasks", "next_cursor", true)
	c.Flags().StringVar(&image, "image", "", "list the tasks for this image")
	c.Flags().StringVar(&status, "status", "", "list the tasks in this status: pending, pulling, completed or failed")
	c.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(prepullStatuses, cobra.ShellCompDirectiveNoFileComp))
	out.register(c, "table", tableFormats)
	return c
}

func newPrepullGetCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:               "get ID [flags]",
		Short:             "show a prepull task",
		Example:           `  agent2env prepull get pp-7 -o yaml`,
		Args:              exactArgs(1, "need one task ID"),
		ValidArgsFunction: cc.complete(e, prepullIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			task, err := cl.Prepull.Get(ctx, args[0])
			if err != nil {
				return view{}, err
			}
			return prepullView(task, []api.PrepullTask{*task}), nil
		}),
	}
	out.register(c, "table", tableFormats)
	return c
}
