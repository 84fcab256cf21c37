package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
)

// importStrategies are the strategies --strategy accepts.
var importStrategies = []string{api.StrategyCreateOnly, api.StrategyUpdateOnly, api.StrategyCreateOrUpdate}

func newImportCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		strategy string
		prepull  bool
		out      output
	)
	c := &cobra.Command{
		Use:   "import FILE [flags]",
		Short: "import templates from LiteBoxd YAML",
		Long: `import creates or updates the templates of a SandboxTemplate or SandboxTemplateList YAML
file (as "export" writes it). It prints what happened to each and exits 1 if any failed.`,
		Example: `  agent2env import templates.yaml --strategy create-only
  curl -s https://liteboxd.example.com/api/v1/templates/export | agent2env import - --prepull`,
		Args: exactArgs(1, "need one FILE of SandboxTemplate or SandboxTemplateList YAML (- for standard input)"),
		RunE: func(c *cobra.Command, args []string) error {
			if !slices.Contains(importStrategies, strategy) {
				return usageErrorf(c, "--strategy %q: want create-only, update-only or create-or-update", strategy)
			}
			r := e.in()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			res, err := cl.ImportExport.ImportTemplates(c.Context(), r, strategy, prepull)
			if err != nil {
				return err
			}
			if err := out.print(e.stdout, view{value: res, text: func(w io.Writer) error { return writeImportResult(w, res) }}); err != nil {
				return err
			}
			// The daemon answers 200 whatever failed; scripts need to know.
			if res.Failed > 0 {
				return fmt.Errorf("templates failed to import: %d of %d", res.Failed, res.Total)
			}
			return nil
		},
	}
	c.Flags().StringVar(&strategy, "strategy", api.StrategyCreateOrUpdate, "what to do with each template: create-only, update-only or create-or-update")
	c.RegisterFlagCompletionFunc("strategy", cobra.FixedCompletions(importStrategies, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().BoolVar(&prepull, "prepull", false, "start prepulling the images of the templates created or updated")
	out.register(c, "a table of the templates and the totals", valueFormats)
	return c
}

// writeImportResult writes the outcome of each template and the totals.
func writeImportResult(w io.Writer, res *api.ImportResult) error {
	t := newTable("NAME", "ACTION", "VERSION", "ERROR")
	for _, it := range res.Results {
		version := "-"
		if it.Version > 0 {
			version = fmt.Sprint(it.Version)
		}
		t.add(orDash(it.Name), it.Action, version, oneLine(it.Error))
	}
	if err := t.write(w, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s: %d created, %d updated, %d skipped, %d failed\n",
		counted(res.Total, "template"), res.Created, res.Updated, res.Skipped, res.Failed)
	if len(res.PrepullStarted) > 0 {
		fmt.Fprintf(w, "prepull started: %s\n", strings.Join(res.PrepullStarted, ", "))
	}
	return nil
}

// namesFlag collects names given comma-separated, repeated, or both.
type namesFlag []string

func (f *namesFlag) Type() string { return "list" }

func (f *namesFlag) String() string { return strings.Join(*f, ",") }

func (f *namesFlag) Set(s string) error {
	*f = append(*f, splitList(s)...)
	return nil
}

func newExportCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		tag   string
		names namesFlag
		out   exportOutput
	)
	c := &cobra.Command{
		Use:   "export [flags]",
		Short: "export templates as LiteBoxd YAML",
		Long: `export writes templates as a SandboxTemplateList YAML document, which "import" (here or
on LiteBoxd) reads, to standard output or, with -f, to a file. ` + exportFormats,
		Example: `  agent2env export > templates.yaml
  agent2env export --tag python --names py311,py312 -f python.yaml
  agent2env export -o json | jq '.items[].metadata.name'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			b, err := cl.ImportExport.ExportAll(c.Context(), tag, names)
			if err != nil {
				return err
			}
			return out.write(e.stdout, b)
		},
	}
	c.Flags().StringVar(&tag, "tag", "", "export the templates carrying this tag")
	c.Flags().Var(&names, "names", "export the templates named in this comma-separated `list` (repeatable)")
	out.register(c)
	return c
}

// exportFormats is what the help of the commands that export templates
// says of their output.
const exportFormats = `-o json converts it to
JSON, which "import" reads too. YAML is written as the daemon wrote it, but that on
standard output a value with characters a terminal acts on is double-quoted with them
escaped, the same value.`

// exportOutput holds the flags of the commands that export templates:
// -o, the format (yaml, as the daemon writes it, or json), and -f, the
// file to write instead of standard output.
type exportOutput struct {
	out  output
	file string
}

func (o *exportOutput) register(c *cobra.Command) {
	o.out.toFile = true
	o.out.register(c, formatYAML, valueFormats)
	c.Flags().StringVarP(&o.file, "file", "f", "", "write to `FILE` instead of standard output (- for standard output)")
}

// write writes b, a YAML document the daemon wrote, in the format chosen
// to the file or standard output.
func (o *exportOutput) write(stdout io.Writer, b []byte) error {
	toStdout := o.file == "" || o.file == "-"
	if o.out.format == formatJSON {
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("convert the export to JSON: %w", err)
		}
		if toStdout {
			return printJSON(stdout, v)
		}
		var err error
		if b, err = json.MarshalIndent(v, "", "  "); err != nil {
			return fmt.Errorf("convert the export to JSON: %w", err)
		}
		b = append(b, '\n')
	}
	if toStdout {
		return writeYAMLDocument(stdout, b)
	}
	return os.WriteFile(o.file, b, 0o644)
}
