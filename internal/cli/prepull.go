package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// prepullCmd groups the prepull client commands.
type prepullCmd struct {
	env
	// poll is how often --wait polls; 0 means the SDK's default.
	poll time.Duration
}

func (c *prepullCmd) Run(ctx context.Context, args []string) error {
	return runGroup(ctx, c.env, "prepull", args, map[string]subcommand{
		"create": {"create IMAGE|--template NAME [flags]", "start fetching an image before sandboxes need it", c.create},
		"ls":     {"ls [flags]", "list prepull tasks", c.list},
		"get":    {"get ID [flags]", "show a prepull task", c.get},
		"rm":     {"rm ID... [flags]", "remove prepull tasks, cancelling active pulls", c.rm},
	})
}

func (c *prepullCmd) create(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "IMAGE|--template NAME [flags]", &cn)
	template := fs.String("template", "", "prepull the image of the latest version of template `NAME`")
	timeout := fs.Int("timeout", 0, "seconds before the pull fails (default: the daemon's, 600)")
	wait := fs.Bool("wait", false, "wait until the pull completes; fail with the reason if it fails")
	asJSON := fs.Bool("json", false, "print the task as JSON")
	pos, err := parseArgs(fs, args, -1)
	if err != nil {
		return err
	}
	switch {
	case *template == "" && len(pos) != 1:
		return usageError(c.env, fs, "need one IMAGE or --template NAME")
	case *template != "" && len(pos) > 0:
		return usageError(c.env, fs, "give an IMAGE or --template NAME, not both")
	case *template != "" && *timeout != 0:
		return usageError(c.env, fs, "--timeout applies to an IMAGE only")
	case *timeout < 0:
		return usageError(c.env, fs, "--timeout must not be negative")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	var task *api.PrepullTask
	if *template != "" {
		task, err = cl.Prepull.CreateForTemplate(ctx, *template)
	} else {
		task, err = cl.Prepull.Create(ctx, pos[0], time.Duration(*timeout)*time.Second)
	}
	if err != nil {
		return err
	}
	// A failed task is still printed, so that scripts can see and remove it.
	var failed error
	if *wait && task.Status != api.PrepullCompleted {
		done, err := cl.Prepull.WaitForCompletion(ctx, task.ID, c.poll)
		if done == nil {
			return err
		}
		task, failed = done, err
	}
	if err := c.printTasks(*asJSON, task, []api.PrepullTask{*task}); err != nil {
		return err
	}
	return failed
}

// prepullStatuses are the statuses ls --status accepts.
var prepullStatuses = []string{api.PrepullPending, api.PrepullPulling, api.PrepullCompleted, api.PrepullFailed}

func (c *prepullCmd) list(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	image := fs.String("image", "", "list the tasks for this image")
	status := fs.String("status", "", "list the tasks in this status: pending, pulling, completed or failed")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	if *status != "" && !slices.Contains(prepullStatuses, *status) {
		return usageError(c.env, fs, "--status %q: want pending, pulling, completed or failed", *status)
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	tasks, err := cl.Prepull.List(ctx, *image, *status)
	if err != nil {
		return err
	}
	return c.printTasks(*asJSON, api.List[api.PrepullTask]{Items: tasks}, tasks)
}

func (c *prepullCmd) get(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "ID [flags]", &cn)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := positional(c.env, fs, args, 1, "need one task ID")
	if err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	task, err := cl.Prepull.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.printTasks(*asJSON, task, []api.PrepullTask{*task})
}

func (c *prepullCmd) rm(ctx context.Context, name string, args []string) error {
	return removeEach(ctx, c.env, name, "ID", "task ID", args,
		func(ctx context.Context, cl *client.Client, id string) error { return cl.Prepull.Delete(ctx, id) })
}

// printTasks prints v as JSON, or tasks as a table.
func (c *prepullCmd) printTasks(asJSON bool, v any, tasks []api.PrepullTask) error {
	if asJSON {
		return printJSON(c.stdout, v)
	}
	tw := table(c.stdout, "ID", "IMAGE", "STATUS", "PROGRESS", "TEMPLATE", "AGE", "ERROR")
	for _, t := range tasks {
		progress := "-"
		if t.Progress.Total > 0 {
			progress = fmt.Sprintf("%d/%d", t.Progress.Ready, t.Progress.Total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Image, t.Status, progress, orDash(t.Template),
			age(t.StartedAt), oneLine(t.Error))
	}
	return tw.Flush()
}
