package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api/client"
)

// This file is the one way commands print what they get from the daemon:
// -o table|wide|json|yaml and -q, registered by output.register and
// printed by output.print.

// Output formats. JSON and YAML print the API's value as it is, so that it
// can be piped to jq; table prints columns for people, and wide more of
// them.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// output holds the -o and -q flags of a command that prints resources.
// The zero format is the command's default: a table, or what the view's
// text prints.
type output struct {
	format string
	quiet  bool
}

// Formats with and without a table.
var (
	tableFormats = []string{formatTable, formatWide, formatJSON, formatYAML}
	valueFormats = []string{formatJSON, formatYAML}
)

// register adds -o (one of formats), the hidden --json (from before -o;
// the same as -o json) and, for commands with a table, -q to c. def says
// what c prints without -o.
func (o *output) register(c *cobra.Command, def string, formats []string) {
	c.Flags().VarP(formatFlag{o, formats}, "output", "o",
		fmt.Sprintf("output format: %s (default: %s)", strings.Join(formats, ", "), def))
	if slices.Contains(formats, formatTable) {
		c.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print only ids (names for templates, references for images), one a line")
	}
	c.Flags().Var(jsonFlag{o}, "json", "the same as -o json")
	c.Flags().Lookup("json").NoOptDefVal = "true"
	c.Flags().Lookup("json").Hidden = true
	c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// formatFlag is -o: it accepts the formats of its command only.
type formatFlag struct {
	o       *output
	formats []string
}

func (f formatFlag) String() string { return f.o.format }
func (f formatFlag) Type() string   { return "format" }
func (f formatFlag) Set(s string) error {
	if !slices.Contains(f.formats, s) {
		return fmt.Errorf("want %s", strings.Join(f.formats, ", "))
	}
	f.o.format = s
	return nil
}

// jsonFlag is the --json of before -o.
type jsonFlag struct{ o *output }

func (f jsonFlag) String() string { return strconv.FormatBool(f.o.format == formatJSON) }
func (f jsonFlag) Type() string   { return "bool" }
func (f jsonFlag) Set(s string) error {
	on, err := strconv.ParseBool(s)
	switch {
	case err != nil:
		return fmt.Errorf("want true or false")
	case on:
		f.o.format = formatJSON
	case f.o.format == formatJSON:
		f.o.format = ""
	}
	return nil
}

// structured reports whether o prints the API's value (JSON or YAML).
func (o *output) structured() bool { return o.format == formatJSON || o.format == formatYAML }

// view is what a command got, in each form it can be printed.
type view struct {
	// value is the API's value, which -o json and -o yaml print as it is.
	value any
	// ids are what -q prints.
	ids []string
	// table is what -o table prints; wide adds its wide columns.
	table *table
	// text, if set, is the default output instead of the table. A view
	// with neither prints JSON.
	text func(w io.Writer) error
}

// show is the RunE of a command that gets something from the daemon and
// prints it: get may also refuse its arguments with a usage error, before
// any request.
func show(e env, cc *clientConfig, o *output, get func(ctx context.Context, cl *client.Client, args []string) (view, error)) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		cl, err := cc.client(e)
		if err != nil {
			return err
		}
		v, err := get(c.Context(), cl, args)
		if err != nil {
			return err
		}
		return o.print(e.stdout, v)
	}
}

// print writes v to w in the format o chose.
func (o *output) print(w io.Writer, v view) error {
	switch {
	case o.quiet:
		for _, id := range v.ids {
			fmt.Fprintln(w, id)
		}
		return nil
	case o.format == formatJSON:
		return printJSON(w, v.value)
	case o.format == formatYAML:
		return printYAML(w, v.value)
	case v.text != nil && (o.format == "" || v.table == nil):
		return v.text(w)
	case v.table != nil:
		return v.table.write(w, o.format == formatWide)
	}
	return printJSON(w, v.value)
}

// table is rows of columns; the columns from wide on are shown only by
// -o wide.
type table struct {
	header []string
	rows   [][]string
	wide   int // 0: no wide columns
}

func newTable(header ...string) *table { return &table{header: header} }

// withWide adds columns that only -o wide shows.
func (t *table) withWide(header ...string) *table {
	t.wide = len(t.header)
	t.header = append(t.header, header...)
	return t
}

// add appends a row: the table's columns, then its wide ones.
func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	n := len(t.header)
	if !wide && t.wide > 0 {
		n = t.wide
	}
	for _, row := range slices.Concat([][]string{t.header}, t.rows) {
		fmt.Fprintln(tw, strings.Join(row[:min(n, len(row))], "\t"))
	}
	return tw.Flush()
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printYAML writes v as YAML with the keys and values its JSON has, in the
// same order.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("convert JSON to YAML: %w", err)
	}
	blockStyle(&n)
	return writeYAMLNode(w, &n)
}

// writeYAMLNode writes n as a YAML document indented by two spaces.
func writeYAMLNode(w io.Writer, n *yaml.Node) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// blockStyle clears the flow style and quoting JSON gave n, keeping each
// scalar's tag: the encoder quotes a string only where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// age formats how long ago t was, coarsely: 42s, 5m, 3h, 12d.
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// formatBytes formats n with binary units: 512 B, 1.5 KiB, 12.3 MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens s to its first line, marking what was cut.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " ..."
	}
	return s
}
