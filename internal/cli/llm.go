package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newLLMCmd(e env, cc *clientConfig) *cobra.Command {
	return group("llm <command>", "read the archive of the LLM proxy: every call sandboxes made to a model; its per-run keys",
		`  agent2env llm ls --sandbox sb-1a2b3c --status 4xx
  agent2env llm show llx_0123 --raw response
  agent2env llm export --run run-7 > run-7.jsonl
  agent2env llm tail -f
  agent2env llm keys create --run run-7 --budget-tokens 200000`,
		newLLMListCmd(e, cc), newLLMShowCmd(e, cc), newLLMExportCmd(e, cc), newLLMTailCmd(e, cc), newLLMKeysCmd(e, cc),
	)
}

// llmFilterFlags are the filters ls, export and tail share.
type llmFilterFlags struct {
	sandbox, run, model, conversation, status, since, until string
}

func (f *llmFilterFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.sandbox, "sandbox", "", "only the exchanges of sandbox `ID`")
	fl.StringVar(&f.run, "run", "", "only the exchanges of run `ID`")
	fl.StringVar(&f.model, "model", "", "only the exchanges that asked for `MODEL`")
	fl.StringVar(&f.conversation, "conversation", "", "only the exchanges of conversation `ID`")
	fl.StringVar(&f.status, "status", "", "an HTTP status (429), a class (4xx) or a state (complete, client_gone, interrupted, in_progress)")
	fl.StringVar(&f.since, "since", "", "only exchanges begun since `TIME` (RFC 3339, or a duration ago: 90m)")
	fl.StringVar(&f.until, "until", "", "only exchanges begun before `TIME` (RFC 3339, or a duration ago)")
}

// filter is the SDK's filter; the daemon judges status and the times'
// order.
func (f *llmFilterFlags) filter(c *cobra.Command, now time.Time) (client.LLMFilter, error) {
	out := client.LLMFilter{Sandbox: f.sandbox, Run: f.run, Model: f.model, Conversation: f.conversation, Status: f.status}
	for _, t := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", f.since, &out.Since}, {"until", f.until, &out.Until}} {
		if t.v == "" {
			continue
		}
		// A duration first: no RFC 3339 time parses as one.
		if d, err := time.ParseDuration(t.v); err == nil && d >= 0 {
			*t.dst = now.Add(-d)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			return out, usageErrorf(c, "--%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration (90m)", t.name, t.v)
		}
		*t.dst = at
	}
	return out, nil
}

func millis(ms float64) string {
	if ms == 0 {
		return "-"
	}
	if ms < 1000 {
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

func orZero(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// llmTable is exchanges as a table.
func llmTable(xs []api.LLMExchange) *table {
	t := newTable("ID", "SANDBOX", "MODEL", "PROVIDER", "STATUS", "STATE", "TOKENS IN/OUT", "TTFT", "DURATION", "AGE").
		withWide("RUN", "FORMAT", "STREAM", "CONVERSATION", "REQUEST", "RESPONSE", "STORED", "ERROR")
	for _, x := range xs {
		t.add(x.ID, orDash(x.SandboxID), orDash(x.Model), orDash(x.Provider), orZero(x.Status), x.State,
			fmt.Sprintf("%d/%d", x.Usage.InputTokens, x.Usage.OutputTokens), millis(x.TimeToFirstByteMs), millis(x.DurationMs),
			age(x.CreatedAt), orDash(x.RunID), x.Format, fmt.Sprint(x.Stream), orDash(x.ConversationID),
			formatBytes(x.RequestBytes), formatBytes(x.ResponseBytes), formatBytes(x.StoredBytes), oneLine(x.Error))
	}
	return t
}

func llmIDs(xs []api.LLMExchange) []string {
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = x.ID
	}
	return ids
}

func newLLMListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		f    llmFilterFlags
		page pageFlags
		out  output
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list the exchanges with models, oldest first (or newest first)",
		Example: `  agent2env llm ls --sandbox sb-1a2b3c
  agent2env llm ls --status 5xx --since 1h -o wide
  agent2env llm ls --newest --limit 20
  agent2env llm ls --limit 50 --cursor "$NEXT" -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			lf, err := f.filter(c, time.Now())
			if err != nil {
				return err
			}
			lf.Limit, lf.Cursor, lf.Order = int(page.limit), page.cursor, page.order()
			return show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
				l, err := cl.LLM().List(ctx, lf)
				if err != nil {
					return view{}, err
				}
				return view{value: l, ids: llmIDs(l.Items), table: llmTable(l.Items)}, nil
			})(c, nil)
		},
	}
	f.register(c)
	page.register(c, "exchanges", "nextCursor", false)
	out.register(c, "table", tableFormats)
	return c
}

var llmParts = []string{api.LLMPartRequest, api.LLMPartUpstreamRequest, api.LLMPartUpstreamResponse, api.LLMPartResponse}

func newLLMShowCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		part string
		out  output
	)
	c := &cobra.Command{
		Use:   "show ID [flags]",
		Short: "show an exchange: its metadata and the four messages (keys redacted)",
		Example: `  agent2env llm show llx_0123
  agent2env llm show llx_0123 --raw upstream_response
  agent2env llm show llx_0123 -o json | jq .response.chunks`,
		Args: exactArgs(1, "need one exchange ID"),
		RunE: func(c *cobra.Command, args []string) error {
			if part != "" {
				if !slices.Contains(llmParts, part) {
					return usageErrorf(c, "--raw %q: want %s", part, strings.Join(llmParts, ", "))
				}
				cl, err := cc.client(e)
				if err != nil {
					return err
				}
				b, err := cl.LLM().Raw(c.Context(), args[0], part)
				if err != nil {
					return err
				}
				_, err = raw(e.stdout).Write(b)
				return err
			}
			return show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
				d, err := cl.LLM().Get(ctx, args[0])
				if err != nil {
					return view{}, err
				}
				return view{value: d, ids: []string{d.ID}, text: func(w io.Writer) error { return writeExchange(w, d) }}, nil
			})(c, args)
		},
	}
	c.Flags().StringVar(&part, "raw", "", "print one part's body exactly as it passed: "+strings.Join(llmParts, ", "))
	c.RegisterFlagCompletionFunc("raw", cobra.FixedCompletions(llmParts, cobra.ShellCompDirectiveNoFileComp))
	out.register(c, "text", valueFormats)
	return c
}

// writeExchange prints an exchange for people: its metadata, then each
// message with its headers and body.
func writeExchange(w io.Writer, d *api.LLMExchangeDetail) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", d.ID}, {"sandbox", orDash(d.SandboxID)}, {"run", orDash(d.RunID)}, {"key", orDash(d.KeyID)},
		{"conversation", orDash(d.ConversationID)}, {"created", d.CreatedAt.Format(time.RFC3339Nano)},
		{"request", d.Format + " " + d.Method + " " + d.Path}, {"model", orDash(d.Model)}, {"provider", orDash(d.Provider)},
		{"upstream model", orDash(d.UpstreamModel)}, {"stream", fmt.Sprint(d.Stream)}, {"passthrough", fmt.Sprint(d.Passthrough)},
		{"status", orZero(d.Status)}, {"state", d.State}, {"error", orDash(d.Error)}, {"attempts", fmt.Sprint(d.Attempts)},
		{"tokens", fmt.Sprintf("in %d, out %d, cached %d, reasoning %d", d.Usage.InputTokens, d.Usage.OutputTokens,
			d.Usage.CachedTokens, d.Usage.ReasoningTokens)},
		{"time to first byte", millis(d.TimeToFirstByteMs)}, {"duration", millis(d.DurationMs)},
		{"stored", formatBytes(d.StoredBytes)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		m    *api.LLMMessage
	}{{"request", d.Request}, {"upstream request", d.UpstreamRequest}, {"upstream response", d.UpstreamResponse}, {"response", d.Response}} {
		if p.m == nil {
			continue
		}
		fmt.Fprintf(w, "\n--- %s", p.name)
		switch {
		case p.m.Status != 0:
			fmt.Fprintf(w, ": %d", p.m.Status)
		case p.m.Method != "":
			fmt.Fprintf(w, ": %s %s", p.m.Method, p.m.URL)
		}
		if len(p.m.Chunks) > 0 {
			last := p.m.Chunks[len(p.m.Chunks)-1]
			fmt.Fprintf(w, " (%d chunks, %s to %s)", len(p.m.Chunks), millis(p.m.Chunks[0].AtMs), millis(last.AtMs))
		}
		fmt.Fprintln(w)
		for _, k := range slices.Sorted(maps.Keys(p.m.Headers)) {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(p.m.Headers[k], ", "))
		}
		fmt.Fprintln(w)
		body := p.m.Body
		if p.m.BodyEncoding != "" {
			body = fmt.Sprintf("(%s, %d characters; --raw prints the bytes)", p.m.BodyEncoding, len(body))
		}
		fmt.Fprintln(w, strings.TrimRight(body, "\n"))
	}
	return nil
}

func newLLMExportCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		f    llmFilterFlags
		file string
	)
	c := &cobra.Command{
		Use:   "export [flags]",
		Short: "export exchanges with their messages as JSON Lines (the replay provider reads them)",
		Long: `export writes exchanges with their messages as JSON Lines, which the replay provider reads.
On standard output the characters JSON leaves raw in strings that a terminal acts on (C1
controls, bidi overrides) are written as \u escapes, the same values; -f writes the daemon's
bytes as they came.`,
		Example: `  agent2env llm export --sandbox sb-1a2b3c > conversation.jsonl
  agent2env llm export --run run-7 --status complete -f run-7.jsonl`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			lf, err := f.filter(c, time.Now())
			if err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			export := func(w io.Writer) error {
				_, err := cl.LLM().Export(c.Context(), lf, w)
				return err
			}
			if file != "" && file != "-" {
				// Whole or not at all, as a download.
				return replaceFile(file, export)
			}
			vw := &visibleWriter{w: raw(e.stdout), how: asQuoted}
			defer vw.Flush()
			return export(vw)
		},
	}
	f.register(c)
	c.Flags().StringVarP(&file, "file", "f", "", "write to `FILE` instead of standard output")
	return c
}

func newLLMTailCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		f      llmFilterFlags
		follow bool
		lines  int
		out    output
	)
	c := &cobra.Command{
		Use:   "tail [flags]",
		Short: "print the latest exchanges; with -f, each new one as soon as it ends",
		Example: `  agent2env llm tail
  agent2env llm tail -f --sandbox sb-1a2b3c
  agent2env llm tail -f -o json | jq .usage`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// Without -f, tail lists everything --since selects to find
			// the last ones: by default not the whole archive.
			if f.since == "" {
				f.since = "24h"
			}
			lf, err := f.filter(c, time.Now())
			if err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			return tailLLM(c.Context(), e, cl, lf, lines, follow, out.format == formatJSON)
		},
	}
	f.register(c)
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing exchanges as they end, until interrupted")
	c.Flags().IntVarP(&lines, "lines", "n", 10, "print the last `N` exchanges first")
	out.register(c, "table", []string{formatTable, formatJSON})
	return c
}

// tailLLM prints the last n ended exchanges lf selects, oldest first;
// following, it then prints each that ends later as the daemon's stream
// sends it (GET /api/v1/llm/exchanges/stream), until interrupted: an
// exchange is printed once, when it is no longer in progress. JSON prints
// one object a line.
func tailLLM(ctx context.Context, e env, cl *client.Client, lf client.LLMFilter, n int, follow, asJSON bool) error {
	if follow {
		header := !asJSON
		err := cl.LLM().Follow(ctx, lf, client.LLMFollowFrom{Last: max(n, 0)}, func(_ string, x api.LLMExchange) error {
			err := printTail(e.stdout, []api.LLMExchange{x}, asJSON, header)
			header = false
			return err
		})
		if sig := interruption(ctx); sig != nil {
			return sig // 128+n, as for a tail -f that a signal ends
		}
		return err
	}
	var ended []api.LLMExchange
	for p := lf; ; {
		l, err := cl.LLM().List(ctx, p)
		if err != nil {
			return err
		}
		for _, x := range l.Items {
			// As -f does, an exchange is shown once it has ended.
			if x.State != "in_progress" {
				ended = append(ended, x)
			}
		}
		if l.NextCursor == "" {
			break
		}
		p.Cursor = l.NextCursor
	}
	ended = ended[len(ended)-min(max(n, 0), len(ended)):]
	return printTail(e.stdout, ended, asJSON, !asJSON)
}

// printTail prints xs as JSON lines, or as rows of fixed widths: -f
// prints a row as each exchange ends, which a tabwriter, aligning on all
// its rows, could not.
func printTail(w io.Writer, xs []api.LLMExchange, asJSON, header bool) error {
	if asJSON {
		for i := range xs {
			if err := writeJSON(w, &xs[i], ""); err != nil {
				return err
			}
		}
		return nil
	}
	if len(xs) == 0 {
		return nil
	}
	for _, x := range xs {
		if header {
			fmt.Fprintf(w, "%-19s  %-28s  %-14s  %-16s  %-6s  %-11s  %-13s  %-7s  %s\n",
				"TIME", "ID", "SANDBOX", "MODEL", "STATUS", "STATE", "TOKENS IN/OUT", "TTFT", "DURATION")
			header = false
		}
		fmt.Fprintf(w, "%-19s  %-28s  %-14s  %-16s  %-6s  %-11s  %-13s  %-7s  %s\n",
			x.CreatedAt.Local().Format("2006-01-02 15:04:05"), visibleField(x.ID), visibleField(orDash(x.SandboxID)),
			visibleField(orDash(x.Model)), orZero(x.Status), visibleField(x.State), fmt.Sprintf("%d/%d", x.Usage.InputTokens, x.Usage.OutputTokens), millis(x.TimeToFirstByteMs), millis(x.DurationMs))
	}
	return nil
}
