package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/api"
)

// importCmd imports templates from LiteBoxd YAML.
type importCmd struct {
	env
	// stdin is what "import -" reads; nil means os.Stdin.
	stdin io.Reader
}

// importStrategies are the strategies --strategy accepts.
var importStrategies = []string{api.StrategyCreateOnly, api.StrategyUpdateOnly, api.StrategyCreateOrUpdate}

func (c *importCmd) Run(ctx context.Context, args []string) error {
	var cn conn
	fs := clientFlags(c.env, "import", "FILE [flags]", &cn)
	strategy := fs.String("strategy", api.StrategyCreateOrUpdate, "what to do with each template: create-only, update-only or create-or-update")
	prepull := fs.Bool("prepull", false, "start prepulling the images of the templates created or updated")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := positional(c.env, fs, args, 1, "need one FILE of SandboxTemplate or SandboxTemplateList YAML (- for standard input)")
	if err != nil {
		return err
	}
	if !slices.Contains(importStrategies, *strategy) {
		return usageError(c.env, fs, "--strategy %q: want create-only, update-only or create-or-update", *strategy)
	}
	var r io.Reader
	if pos[0] == "-" {
		r = c.stdin
		if r == nil {
			r = os.Stdin
		}
	} else {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	res, err := cl.ImportExport.ImportTemplates(ctx, r, *strategy, *prepull)
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSON(c.stdout, res)
	} else {
		err = c.printResult(res)
	}
	if err != nil {
		return err
	}
	// The daemon answers 200 whatever failed; scripts need to know.
	if res.Failed > 0 {
		return fmt.Errorf("templates failed to import: %d of %d", res.Failed, res.Total)
	}
	return nil
}

// printResult prints the outcome of each template and the totals.
func (c *importCmd) printResult(res *api.ImportResult) error {
	tw := table(c.stdout, "NAME", "ACTION", "VERSION", "ERROR")
	for _, it := range res.Results {
		version := "-"
		if it.Version > 0 {
			version = fmt.Sprint(it.Version)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", orDash(it.Name), it.Action, version, oneLine(it.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "templates"
	if res.Total == 1 {
		noun = "template"
	}
	fmt.Fprintf(c.stdout, "\n%d %s: %d created, %d updated, %d skipped, %d failed\n",
		res.Total, noun, res.Created, res.Updated, res.Skipped, res.Failed)
	if len(res.PrepullStarted) > 0 {
		fmt.Fprintf(c.stdout, "prepull started: %s\n", strings.Join(res.PrepullStarted, ", "))
	}
	return nil
}

// exportCmd exports templates as LiteBoxd YAML.
type exportCmd struct {
	env
}

// namesFlag collects names given comma-separated, repeated, or both.
type namesFlag []string

func (f *namesFlag) String() string { return strings.Join(*f, ",") }

func (f *namesFlag) Set(s string) error {
	*f = append(*f, splitList(s)...)
	return nil
}

func (c *exportCmd) Run(ctx context.Context, args []string) error {
	var cn conn
	fs := clientFlags(c.env, "export", "[flags]", &cn)
	tag := fs.String("tag", "", "export the templates carrying this tag")
	var names namesFlag
	fs.Var(&names, "names", "export the templates named in this comma-separated `list` (repeatable)")
	out := fs.String("o", "", "write to `FILE` instead of standard output")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	b, err := cl.ImportExport.ExportAll(ctx, *tag, names)
	if err != nil {
		return err
	}
	return writeOutput(c.stdout, *out, b)
}
