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
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/template"
)

// This file is the one way commands print what they get from the daemon:
// -o table|wide|json|yaml and -q, registered by output.register and
// printed by output.print; and the one place where text the CLI did not
// write is made safe for a terminal (appendVisible, below).

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
	// raw prints a text view's bytes as they came (--raw), control
	// characters included.
	raw bool
	// toFile says the command writes a file with -f: an -o value that is
	// not a format (a file name, as -o meant once) is refused pointing to
	// -f.
	toFile bool
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
		if f.o.toFile {
			return fmt.Errorf("want %s; to write a file, use -f %s", strings.Join(f.formats, ", "), s)
		}
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

// registerRaw adds --raw to c, whose text view prints what, a sandbox's
// output.
func (o *output) registerRaw(c *cobra.Command, what string) {
	c.Flags().BoolVar(&o.raw, "raw", false, "print "+what+" as it came, escape sequences included, "+
		"for files and pipes (default: control characters made visible, such as \\x1b)")
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
			fmt.Fprintln(w, visibleField(id))
		}
		return nil
	case o.format == formatJSON:
		return printJSON(w, v.value)
	case o.format == formatYAML:
		return printYAML(w, v.value)
	case v.text != nil && (o.format == "" || v.table == nil):
		if o.raw {
			return v.text(raw(w))
		}
		vw := visibleText(w)
		err := v.text(vw)
		if ferr := vw.Flush(); err == nil {
			err = ferr
		}
		return err
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
		cells := make([]string, min(n, len(row)))
		for i := range cells {
			cells[i] = visibleField(row[i])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error { return writeJSON(w, v, "  ") }

// writeJSON writes v as JSON, on one line when indent is empty. The
// characters encoding/json leaves raw in strings (DEL, C1 controls, bidi
// overrides) are written as \u escapes: the same value, nothing a
// terminal acts on.
func writeJSON(w io.Writer, v any, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := raw(w).Write(appendVisible(nil, buf.Bytes(), asQuoted))
	return err
}

// printYAML writes v as YAML with the keys and values its JSON has, in the
// same order.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// YAML refuses the DEL and C1 controls encoding/json leaves raw: \u
	// escapes are YAML's too.
	var n yaml.Node
	if err := yaml.Unmarshal(appendVisible(nil, b, asQuoted), &n); err != nil {
		return fmt.Errorf("convert JSON to YAML: %w", err)
	}
	blockStyle(&n)
	var buf bytes.Buffer
	if err := writeYAMLNode(&buf, &n); err != nil {
		return err
	}
	// The scalars with characters to escape are double-quoted (blockStyle):
	// yaml.v3 escapes the controls in them, and \u escapes the rest.
	_, err = raw(w).Write(appendVisible(nil, buf.Bytes(), asQuoted))
	return err
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
// scalar's tag: the encoder quotes a string only where YAML needs it, and
// where it holds characters that a terminal acts on, which only a
// double-quoted scalar can escape.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	quoteToEscape(n)
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// quoteToEscape double-quotes n if it is a scalar holding characters that
// a terminal acts on, or a string yaml.v3 would not read back as it is
// (template.Unreadable: "<<", a multi-line string that starts with space).
func quoteToEscape(n *yaml.Node) {
	if n.Kind != yaml.ScalarNode {
		return
	}
	if string(appendVisible(nil, []byte(n.Value), asText)) != n.Value || n.Tag == "!!str" && template.Unreadable(n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
}

// quoteAllToEscape is quoteToEscape on n and all it holds.
func quoteAllToEscape(n *yaml.Node) {
	quoteToEscape(n)
	for _, c := range n.Content {
		quoteAllToEscape(c)
	}
}

// writeYAMLDocument writes b, a YAML document the daemon wrote, as it is,
// unless it holds characters that a terminal acts on (yaml.v3 escapes
// controls but not bidi overrides): then encoded again with the scalars
// that hold them double-quoted and escaped, the same values.
func writeYAMLDocument(w io.Writer, b []byte) error {
	if bytes.Equal(appendVisible(nil, b, asText), b) {
		_, err := raw(w).Write(b)
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		// Not YAML after all: text.
		_, err := raw(w).Write(appendVisible(nil, b, asText))
		return err
	}
	quoteAllToEscape(&n)
	var buf bytes.Buffer
	if err := writeYAMLNode(&buf, &n); err != nil {
		return err
	}
	_, err := raw(w).Write(appendVisible(nil, buf.Bytes(), asQuoted))
	return err
}

// counted is n and noun, plural unless n is 1: "1 run", "2 runs".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
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

// Text that the CLI did not write (names, messages, a sandbox's output,
// anything the daemon sends) may hold characters a terminal acts on: an
// escape sequence printed raw can set the window's title, write the
// clipboard (OSC 52) or erase what is on screen, and bidi overrides
// reorder what is shown. appendVisible writes them visibly, as a Go
// string literal writes them (\x1b, \a, \r, \u009b, \u202e; \xff for a
// byte that is not UTF-8); a backslash stays as it is. Every command's
// standard output and error pass through it (execute installs a
// visibleWriter on both); the outputs documented as raw (your own
// command's output in sandbox exec, context exec and session exec/run,
// downloads, --raw) take the writer under it with raw.

// escaping is how appendVisible treats what it writes.
type escaping int

const (
	// asText is lines of text: newlines, tabs and the CR of a CRLF stay.
	asText escaping = iota
	// asField is one field of a line, such as a table's cell: newlines,
	// tabs and every CR are made visible too.
	asField
	// asQuoted is JSON, or YAML whose scalars to escape are double-quoted:
	// \u escapes, which keep a string's value; whitespace stays.
	asQuoted
)

// appendVisible appends s to dst with the C0 controls (but what how
// keeps), DEL, the C1 controls (U+0080–U+009F, which some terminals take
// for CSI and OSC), the bidi overrides and isolates (U+202A–U+202E,
// U+2066–U+2069) and the bytes that are not UTF-8 written as escapes.
func appendVisible(dst, s []byte, how escaping) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && n == 1 && how == asQuoted:
			dst = append(dst, `\ufffd`...)
		case r == utf8.RuneError && n == 1:
			dst = fmt.Appendf(dst, `\x%02x`, s[i])
		case !actsOn(r, s[i+n:], how):
			dst = append(dst, s[i:i+n]...)
		case how == asQuoted:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			q := strconv.QuoteRune(r)
			dst = append(dst, q[1:len(q)-1]...)
		}
		i += n
	}
	return dst
}

// actsOn reports whether a terminal would act on r, followed by rest,
// rather than show it.
func actsOn(r rune, rest []byte, how escaping) bool {
	switch {
	case r == '\n' || r == '\t':
		return how == asField
	case r == '\r':
		// A lone CR returns to the start of the line, to overwrite it.
		return how == asField || len(rest) == 0 || rest[0] != '\n'
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	}
	return false
}

// visible is s, lines of text, made safe for a terminal.
func visible(s string) string { return string(appendVisible(nil, []byte(s), asText)) }

// visibleField is s, a field of a line (a cell, an id), made safe for a
// terminal and kept on one line.
func visibleField(s string) string { return string(appendVisible(nil, []byte(s), asField)) }

// visibleWriter writes what is written to it through appendVisible to w.
// It holds back an incomplete UTF-8 sequence or a CR at the end of a
// write until the next one tells what they are; Flush writes them. It is
// safe for concurrent use.
type visibleWriter struct {
	w   io.Writer
	how escaping

	mu   sync.Mutex
	held []byte
}

// visibleText returns w if it already writes visibly, or a visibleWriter
// of text to w.
func visibleText(w io.Writer) *visibleWriter {
	if v, ok := w.(*visibleWriter); ok {
		return v
	}
	return &visibleWriter{w: w, how: asText}
}

func (v *visibleWriter) Write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := append(v.held, p...)
	n := len(s) - undecided(s, v.how)
	out := appendVisible(nil, s[:n], v.how)
	v.held = append([]byte(nil), s[n:]...)
	if len(out) > 0 {
		if _, err := v.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what Write held back: it ends no sequence.
func (v *visibleWriter) Flush() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.held) == 0 {
		return nil
	}
	out := appendVisible(nil, v.held, v.how)
	v.held = nil
	_, err := v.w.Write(out)
	return err
}

// undecided is how many bytes at the end of s the next write may change
// the meaning of: a CR that may start a CRLF, or the start of a UTF-8
// sequence.
func undecided(s []byte, how escaping) int {
	if len(s) > 0 && s[len(s)-1] == '\r' && how != asField {
		return 1
	}
	for k := 1; k < utf8.UTFMax && k <= len(s); k++ {
		if utf8.RuneStart(s[len(s)-k]) {
			if !utf8.FullRune(s[len(s)-k:]) {
				return k
			}
			return 0
		}
	}
	return 0
}

// raw returns the writer under w's escaping, for output documented as
// written as it came; what w held back is written first.
func raw(w io.Writer) io.Writer {
	if v, ok := w.(*visibleWriter); ok {
		v.Flush()
		return v.w
	}
	return w
}
