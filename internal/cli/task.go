package cli

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/task"
)

func newTaskCmd(e env, cc *clientConfig) *cobra.Command {
	return group("task <command>", "run task files: agent CLIs in sandboxes, watched, with results and artifacts",
		`  agent2env task validate tasks/*.yaml
  agent2env task run tasks/hello.yaml --agent codex -k 5 --parallel 5 --out results
  agent2env task ls
  agent2env task logs -f RUN_ID
  agent2env task rm RUN_ID`,
		newTaskValidateCmd(e), newTaskRunCmd(e, cc), newTaskListCmd(e, cc), newTaskShowCmd(e, cc),
		newTaskLogsCmd(e, cc), newTaskCancelCmd(e, cc), newTaskArtifactsCmd(e, cc),
		removeCmd(e, cc, "RUN_ID", "run id", "remove ended task runs with their logs and artifacts",
			`  agent2env task rm RUN_ID
  agent2env task ls -q --batch b-0123456789abcdef | xargs -r agent2env task rm`,
			runIDs, func(ctx context.Context, cl *client.Client, id string) error { return cl.Runs().Delete(ctx, id) }),
	)
}

func runIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	list, err := cl.Runs().List(ctx, client.ListRunsOptions{})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list.Items))
	for i, r := range list.Items {
		ids[i] = r.ID
	}
	return ids, nil
}

func newTaskValidateCmd(e env) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE... [flags]",
		Short: "check task files without a daemon, printing every problem with its field and line",
		Long: `validate loads each task file as the daemon would (YAML or JSON, api/task.schema.json) and
prints "FILE: ok", or each problem with its field and line. It exits 1 when any file does not
load. The model names are checked by the daemon, which knows its LLM proxy's models.`,
		Example: `  agent2env task validate tasks/*.yaml`,
		Args:    minArgs(1, "need at least one task file"),
		RunE: func(c *cobra.Command, args []string) error {
			bad := 0
			for _, p := range args {
				if _, err := task.LoadFile(p); err != nil {
					// On stdout with the oks: the report is the output.
					fmt.Fprintln(e.stdout, err)
					bad++
					continue
				}
				fmt.Fprintf(e.stdout, "%s: ok\n", p)
			}
			if bad > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// runView shows runs: the API's value v, a table of rs.
func runView(v any, rs []api.Run) view {
	t := newTable("RUN", "TASK", "AGENT", "MODEL", "#", "STATUS", "PHASE", "TIME", "REASON").
		withWide("SANDBOX", "TOKENS IN/OUT", "CREATED")
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
		t.add(r.ID, r.Task, r.Agent, orDash(r.Model), strconv.Itoa(r.Repeat), string(r.Status), r.Phase, runTime(r),
			orDash(clip(oneLine(r.Reason), 60)), orDash(r.SandboxID), tokens(r.LLM), age(r.CreatedAt))
	}
	return view{value: v, ids: ids, table: t}
}

// runTime is how long a run has gone, or went.
func runTime(r api.Run) string {
	if r.StartedAt == nil {
		return "-"
	}
	end := time.Now()
	if r.EndedAt != nil {
		end = *r.EndedAt
	}
	return end.Sub(*r.StartedAt).Round(100 * time.Millisecond).String()
}

func tokens(u api.RunLLMUsage) string {
	if u.Requests == 0 && u.InputTokens == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", u.InputTokens, u.OutputTokens)
}

// clip cuts s to n bytes at most, at a rune's start, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - 1
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// runStatuses are the statuses task ls selects by (api.RunStatus).
var runStatuses = []string{string(api.RunQueued), string(api.RunRunning), string(api.RunSucceeded), string(api.RunFailed),
	string(api.RunHung), string(api.RunTimeout), string(api.RunSandboxLost), string(api.RunCancelled)}

func newTaskListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		out      output
		batch    string
		statuses []string
		agents   []string
		models   []string
		page     pageFlags
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list task runs, oldest first (or newest first)",
		Example: `  agent2env task ls
  agent2env task ls --newest --limit 20
  agent2env task ls --limit 100 --cursor "$NEXT" -o json
  agent2env task ls --batch b-0123456789abcdef -o wide
  agent2env task ls --status failed,timeout,hung
  agent2env task ls --agent claude-code --model claude-sonnet-4-5 -o wide
  agent2env task ls -q --status queued,running | xargs -r agent2env task cancel`,
		Args: noArgs,
		PreRunE: func(c *cobra.Command, _ []string) error {
			for _, st := range statuses {
				if !slices.Contains(runStatuses, st) {
					return usageErrorf(c, "--status %q: want one or more of %s", st, strings.Join(runStatuses, ", "))
				}
			}
			for _, a := range agents {
				if !slices.Contains(task.Agents, a) {
					return usageErrorf(c, "--agent %q: want one or more of %s", a, strings.Join(task.Agents, ", "))
				}
			}
			if slices.Contains(models, "") {
				return usageErrorf(c, "--model: an empty name")
			}
			return nil
		},
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			opts := client.ListRunsOptions{Batch: batch, Agents: agents, Models: models, Limit: int(page.limit), Cursor: page.cursor, Order: page.order()}
			for _, st := range statuses {
				opts.Statuses = append(opts.Statuses, api.RunStatus(st))
			}
			list, err := cl.Runs().List(ctx, opts)
			if err != nil {
				return view{}, err
			}
			return runView(list, list.Items), nil
		}),
	}
	c.Flags().StringVar(&batch, "batch", "", "only the runs of this submission")
	c.Flags().StringSliceVar(&statuses, "status", nil, "only the runs in one of these statuses (comma-separated): "+strings.Join(runStatuses, ", "))
	c.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(runStatuses, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringSliceVar(&agents, "agent", nil, "only the runs of one of these agents (comma-separated): "+strings.Join(task.Agents, ", "))
	c.RegisterFlagCompletionFunc("agent", cobra.FixedCompletions(task.Agents, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringSliceVar(&models, "model", nil, "only the runs of one of these models (comma-separated), by the name the run records")
	page.register(c, "runs", "next_cursor", false)
	out.register(c, "table", tableFormats)
	return c
}

func newTaskShowCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:               "show RUN_ID [flags]",
		Short:             "show a task run: its status, reason, timings, tokens, last output lines and artifacts",
		Example:           `  agent2env task show run-0123456789abcdef -o json`,
		Args:              exactArgs(1, "need a run id"),
		ValidArgsFunction: cc.complete(e, runIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			r, err := cl.Runs().Get(ctx, args[0])
			if err != nil {
				return view{}, err
			}
			return view{value: r, text: func(w io.Writer) error { return printRun(w, *r) }}, nil
		}),
	}
	out.register(c, "text", valueFormats)
	return c
}

// printRun writes a run's record as text.
func printRun(w io.Writer, r api.Run) error {
	fmt.Fprintf(w, "run:      %s (batch %s)\ntask:     %s\nagent:    %s %s\nrepeat:   %d\nstatus:   %s (%s)\n",
		r.ID, r.BatchID, r.Task, r.Agent, r.Model, r.Repeat, r.Status, r.Phase)
	if r.Reason != "" {
		fmt.Fprintf(w, "reason:   %s\n", strings.ReplaceAll(r.Reason, "\n", "\n          "))
	}
	if r.ExitCode != nil {
		fmt.Fprintf(w, "exit:     %d\n", *r.ExitCode)
	}
	fmt.Fprintf(w, "time:     %s\n", runTime(r))
	for _, p := range []string{api.PhaseCreate, api.PhaseInputs, api.PhaseSetup, api.PhaseAgent, api.PhaseCheck, api.PhaseArtifacts} {
		if v, ok := r.Timings[p]; ok {
			fmt.Fprintf(w, "  %-10s %s\n", p, (time.Duration(v * float64(time.Millisecond))).Round(time.Millisecond))
		}
	}
	if r.LLM.Requests > 0 || r.LLM.InputTokens > 0 {
		fmt.Fprintf(w, "llm:      %d requests, %d tokens in (%d cached), %d out (%s)\n", r.LLM.Requests, r.LLM.InputTokens,
			r.LLM.CachedTokens, r.LLM.OutputTokens, r.LLM.Source)
	}
	if convs := r.ConversationIDs; len(convs) > 0 {
		fmt.Fprintf(w, "conversations: %s (agent2env llm ls --run %s)\n", strings.Join(convs, ", "), r.ID)
	} else if r.ConversationID != "" {
		fmt.Fprintf(w, "conversation: %s (agent2env llm ls --run %s)\n", r.ConversationID, r.ID)
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "artifact: %s (%s)\n", a.Path, formatBytes(a.Size))
	}
	if r.ArtifactsTruncated {
		fmt.Fprintln(w, "artifacts: more left out at the size limit")
	}
	if r.ArtifactsError != "" {
		fmt.Fprintf(w, "artifacts: not all collected: %s\n", strings.ReplaceAll(r.ArtifactsError, "\n", "\n          "))
	}
	if len(r.OutputTail) > 0 {
		fmt.Fprintln(w, "output (last lines):")
		for _, l := range r.OutputTail {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	return nil
}

func newTaskLogsCmd(e env, cc *clientConfig) *cobra.Command {
	var follow, rawOut bool
	c := &cobra.Command{
		Use:   "logs RUN_ID [flags]",
		Short: "print a task run's output; -f follows its events live until it ends",
		Long: `logs prints a task run's output, or with -f its events as they come, with the control
characters in them made visible (\x1b, \u009b): the agent wrote them, not you. --raw prints
them as they came, for files and pipes.`,
		Example: `  agent2env task logs run-0123456789abcdef
  agent2env task logs -f run-0123456789abcdef
  agent2env task logs --raw run-0123456789abcdef > output.log`,
		Args:              exactArgs(1, "need a run id"),
		ValidArgsFunction: cc.complete(e, runIDs, false),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			w := e.stdout
			if rawOut {
				w = raw(w)
			}
			if !follow {
				rc, err := cl.Runs().Logs(c.Context(), args[0])
				if err != nil {
					return err
				}
				defer rc.Close()
				_, err = io.Copy(w, rc)
				return err
			}
			return cl.Runs().Events(c.Context(), args[0], func(ev api.RunEvent) error {
				printEvent(w, ev)
				return nil
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "follow the run's events (phases, output, tool calls, liveness) until it ends")
	c.Flags().BoolVar(&rawOut, "raw", false, "print the output as the agent wrote it, escape sequences included")
	return c
}

// printEvent writes one run event as a line.
func printEvent(w io.Writer, ev api.RunEvent) {
	at := ev.Time.Local().Format("15:04:05.000")
	switch ev.Type {
	case api.RunEventOutput:
		if ev.Stream == "stderr" {
			fmt.Fprintf(w, "%s [stderr] %s\n", at, ev.Text)
		} else {
			fmt.Fprintf(w, "%s %s\n", at, ev.Text)
		}
	case api.RunEventPhase:
		fmt.Fprintf(w, "%s == %s %s\n", at, ev.Phase, ev.Text)
	case api.RunEventAgent:
		switch ev.Kind {
		case "tool_call":
			fmt.Fprintf(w, "%s -> %s %s\n", at, ev.Tool, clip(oneLine(fmt.Sprint(ev.Input)), 200))
		case "llm_call":
			if ev.Usage != nil {
				fmt.Fprintf(w, "%s .. llm call: %d tokens in, %d out\n", at, ev.Usage.InputTokens, ev.Usage.OutputTokens)
			}
		default:
			fmt.Fprintf(w, "%s %s: %s\n", at, ev.Kind, clip(oneLine(ev.Text), 300))
		}
	case api.RunEventLiveness:
		fmt.Fprintf(w, "%s !! %s\n", at, ev.Text)
	case api.RunEventEnd:
		fmt.Fprintf(w, "%s == %s: %s\n", at, ev.Status, ev.Reason)
	}
}

func newTaskCancelCmd(e env, cc *clientConfig) *cobra.Command {
	return &cobra.Command{
		Use:               "cancel RUN_ID... [flags]",
		Short:             "cancel task runs; each ends cancelled once its agent is stopped and its artifacts collected",
		Example:           `  agent2env task ls -q --status queued,running | xargs -r agent2env task cancel`,
		Args:              minArgs(1, "need at least one run id"),
		ValidArgsFunction: cc.complete(e, runIDs, true),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			return forEach(e, args, func(id string) error {
				_, err := cl.Runs().Cancel(c.Context(), id)
				return err
			})
		},
	}
}

func newTaskArtifactsCmd(e env, cc *clientConfig) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "artifacts RUN_ID [flags]",
		Short: "download a task run's artifacts into a directory, by their paths in the sandbox",
		Long: `artifacts downloads a task run's artifacts into a directory, by their paths in the sandbox;
--out - writes the tar archive to standard output as it came.`,
		Example: `  agent2env task artifacts run-0123456789abcdef --out ./artifacts
  agent2env task artifacts run-0123456789abcdef --out - | tar tv`,
		Args:              exactArgs(1, "need a run id"),
		ValidArgsFunction: cc.complete(e, runIDs, false),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			if dir == "" {
				dir = args[0]
			}
			rc, err := cl.Runs().Artifacts(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer rc.Close()
			if dir == "-" {
				_, err = io.Copy(raw(e.stdout), rc)
				return err
			}
			n, err := extractTar(rc, dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "%d artifacts in %s\n", n, dir)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "out", "", "directory to write them into, - for the tar archive on standard output (default: the run id)")
	return c
}

// extractTar writes the regular files of a tar archive under dir and
// returns how many; names leaving dir are refused. The archive holds what
// an agent left in its sandbox: a link or a "../" name could otherwise
// have it write anywhere the user can, so links are skipped, never made.
func extractTar(r io.Reader, dir string) (int, error) {
	tr := tar.NewReader(r)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read artifacts: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if rel, err := filepath.Rel(dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return n, fmt.Errorf("read artifacts: %q leaves the directory", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return n, err
		}
		f, err := os.Create(p)
		if err != nil {
			return n, err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return n, fmt.Errorf("write %s: %w", p, err)
		}
		n++
	}
}
