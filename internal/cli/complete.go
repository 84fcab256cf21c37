package cli

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api/client"
)

// This file completes what the daemon knows (sandbox ids, template
// names...) for the shell scripts "agent2env completion" writes.

// lister lists the values an argument or a flag can take.
type lister func(ctx context.Context, cl *client.Client) ([]string, error)

// complete returns a completion function offering what list returns, for
// the first argument only or, with many, for every argument. A daemon
// that does not answer within two seconds completes nothing.
func (cc *clientConfig) complete(e env, list lister, many bool) cobra.CompletionFunc {
	return func(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, err := cc.client(e)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(c.Context(), 2*time.Second)
		defer cancel()
		vals, err := list(ctx, cl)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		// Each value once on the command line; one a line, and nothing
		// the shell's terminal would act on.
		vals = slices.DeleteFunc(vals, func(v string) bool { return slices.Contains(args, v) })
		for i, v := range vals {
			vals[i] = visibleField(v)
		}
		return vals, cobra.ShellCompDirectiveNoFileComp
	}
}

func sandboxIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	sbs, err := cl.Sandbox.List(ctx)
	ids := make([]string, len(sbs))
	for i, sb := range sbs {
		ids[i] = sb.ID
	}
	return ids, err
}

func templateNames(ctx context.Context, cl *client.Client) ([]string, error) {
	l, err := cl.Template.List(ctx, client.ListTemplatesOptions{Page: 1, PageSize: 100})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(l.Items))
	for i, t := range l.Items {
		names[i] = t.Name
	}
	return names, nil
}

func contextIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	cxs, err := cl.Contexts().List(ctx, client.ListContextsOptions{})
	ids := make([]string, len(cxs))
	for i, cx := range cxs {
		ids[i] = cx.ContextID
	}
	return ids, err
}

func prepullIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	tasks, err := cl.Prepull.List(ctx, "", "")
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids, err
}

func imageRefs(ctx context.Context, cl *client.Client) ([]string, error) {
	imgs, err := cl.Image.List(ctx)
	refs := make([]string, len(imgs))
	for i, img := range imgs {
		refs[i] = img.Ref
	}
	return refs, err
}
