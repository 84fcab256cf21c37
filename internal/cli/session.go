package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newSessionCmd(e env, cc *clientConfig) *cobra.Command {
	return group("session <command>", "run code and commands in sessions that make and clean up their own sandboxes",
		`  agent2env session exec --session demo 'x = 6 * 7'
  agent2env session exec --session demo 'print(x)'
  agent2env session run --session demo -- ls -la /workspace
  agent2env session rm demo`,
		newSessionExecCmd(e, cc), newSessionRunCmd(e, cc), newSessionListCmd(e, cc), newSessionInfoCmd(e, cc),
		removeCmd(e, cc, "SESSION_ID", "session id", "end sessions and remove their sandboxes",
			`  agent2env session rm demo
  agent2env session ls -q | xargs -r agent2env session rm`, sessionIDs,
			func(ctx context.Context, cl *client.Client, id string) error { return cl.Sessions().Delete(ctx, id) }),
	)
}

func sessionIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	ss, err := cl.Sessions().List(ctx)
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.SessionID
	}
	return ids, err
}

// sessionView shows sessions: the API's value v, a table of ss.
func sessionView(v any, ss []api.Session) view {
	t := newTable("SESSION ID", "FLAVOR", "LANGUAGES", "EXECUTIONS", "LAST USED", "EXPIRES").
		withWide("SANDBOX", "CPU", "MEMORY", "BUSY", "ERRORS", "CREATED")
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.SessionID
		t.add(s.SessionID, s.Flavor, orDash(strings.Join(s.Languages, ",")), strconv.Itoa(s.ExecutionCount), age(s.LastUsedAt),
			s.ExpiresAt.Local().Format(time.DateTime), s.SandboxID, s.CPU, s.Memory, strconv.Itoa(s.Busy), strconv.Itoa(s.ErrorCount),
			age(s.CreatedAt))
	}
	return view{value: v, ids: ids, table: t}
}

// sessionFlags are the flags exec and run share.
type sessionFlags struct {
	session, flavor string
	timeout         time.Duration
}

func (f *sessionFlags) register(c *cobra.Command) {
	c.Flags().StringVarP(&f.session, "session", "s", "", "session id: one that exists is reused, an unknown one is made (default: a new session)")
	c.Flags().StringVar(&f.flavor, "flavor", "", "size of a new session's sandbox: small, medium or large (default: the daemon's)")
	timeoutVar(c.Flags(), &f.timeout, "`SECONDS` (or a duration such as 2m) before the run is interrupted (default: $"+envRunTimeout+", else the daemon's, 30)")
}

// timeoutSeconds is the run's timeout in seconds (see runTimeout); 0
// leaves it to the daemon.
func (f *sessionFlags) timeoutSeconds(c *cobra.Command, e env) (float64, error) {
	d, err := runTimeout(c, e, f.timeout)
	return d.Seconds(), err
}

// created tells which session a run made, so that the next can reuse it:
// on stderr, since stdout is the code's own output, which scripts capture.
func created(e env, info api.SessionInfo) {
	if info.Created {
		fmt.Fprintf(e.stderr, "agent2env: session %s created (expires %s unless used)\n", info.SessionID,
			info.ExpiresAt.Local().Format(time.DateTime))
	}
}

func newSessionExecCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		f    sessionFlags
		lang string
		env  = envFlag{}
		out  output
	)
	c := &cobra.Command{
		Use:   "exec [CODE|-] [flags]",
		Short: "run code (python, javascript or bash) in a session, from CODE or standard input",
		Long: `exec runs code in the session's interpreter of its language, whose state (variables,
imports, functions) stays for the session's next runs. It prints the output (as it came,
escape sequences included: it is your code's), the value of the last expression and a line
for each image, and exits 1 when the code failed, 124 when it timed out.`,
		Example: `  agent2env session exec --session demo 'import pandas as pd; df = pd.DataFrame({"a": [1, 2]})'
  agent2env session exec --session demo 'df.describe()'
  agent2env session exec --session demo --language javascript < script.js`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf(c, "at most one CODE argument (none or - reads the code from standard input)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			timeout, err := f.timeoutSeconds(c, e)
			if err != nil {
				return err
			}
			code, err := codeArg(e, args)
			if err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			stop := showBuilds(c.Context(), e, cl) // a new session's sandbox may wait for its image
			res, err := cl.Sessions().ExecuteCode(c.Context(), api.SessionExecuteRequest{Code: code, Language: lang,
				SessionID: f.session, Flavor: f.flavor, Timeout: timeout, Env: env})
			stop()
			if err != nil {
				return err
			}
			created(e, res.SessionInfo)
			if out.structured() {
				err = out.print(e.stdout, view{value: res})
			} else {
				stdout, stderr := &lineWriter{w: raw(e.stdout)}, &lineWriter{w: raw(e.stderr)}
				io.WriteString(stdout, res.Output.Stdout)
				io.WriteString(stderr, res.Output.Stderr)
				for _, r := range res.Results {
					printResult(stdout, r)
				}
				if res.Error != nil {
					printExecutionError(stderr, *res.Error)
				}
				stdout.endLine()
				stderr.endLine()
			}
			if err == nil && !res.Success {
				err = codeExit(res.Error)
			}
			return err
		},
	}
	f.register(c)
	c.Flags().StringVarP(&lang, "language", "l", "python", "python, javascript or bash")
	c.Flags().VarP(env, "env", "e", "environment variable `KEY=VALUE` of this run only (repeatable)")
	out.register(c, "the output", valueFormats)
	return c
}

// codeArg is the code of CODE, or standard input when there is none or it
// is "-".
func codeArg(e env, args []string) (string, error) {
	if len(args) == 1 && args[0] != "-" {
		return args[0], nil
	}
	b, err := io.ReadAll(e.in())
	if err != nil {
		return "", fmt.Errorf("read code from standard input: %w", err)
	}
	return string(b), nil
}

func newSessionRunCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		f     sessionFlags
		shell string
		cwd   string
		env   = envFlag{}
		out   output
	)
	c := &cobra.Command{
		Use:   "run [flags] [-- COMMAND [ARG...]]",
		Short: "run a command in a session's sandbox",
		Long: `run runs a command in the session's sandbox: the argv after --, or a shell string with
--shell. It prints its output as it came (escape sequences included: it is your command's)
and exits with the command's exit code (124 when it timed out).`,
		Example: `  agent2env session run --session demo -- python3 -c 'print(1)'
  agent2env session run --session demo --shell 'pip list | grep pandas'
  agent2env session run --session demo --cwd /tmp -e DEBUG=1 -- env`,
		RunE: func(c *cobra.Command, args []string) error {
			if (shell == "") == (len(args) == 0) {
				return usageErrorf(c, "give a command after -- or a --shell string, one of the two")
			}
			timeout, err := f.timeoutSeconds(c, e)
			if err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			stop := showBuilds(c.Context(), e, cl) // a new session's sandbox may wait for its image
			res, err := cl.Sessions().ExecuteCommand(c.Context(), api.SessionCommandRequest{
				Command: commandLine(args, shell), SessionID: f.session, Flavor: f.flavor,
				Timeout: timeout, Cwd: cwd, Env: env})
			stop()
			if err != nil {
				return err
			}
			created(e, res.SessionInfo)
			if out.structured() {
				err = out.print(e.stdout, view{value: res})
			} else {
				io.WriteString(raw(e.stdout), res.Stdout)
				io.WriteString(raw(e.stderr), res.Stderr)
				if res.TimedOut {
					fmt.Fprintf(e.stderr, "%s: the command timed out and was killed\n", c.CommandPath())
				}
			}
			switch {
			case err == nil && res.TimedOut:
				err = &exitError{code: timeoutExit}
			case err == nil && res.ExitCode != 0:
				err = &exitError{code: res.ExitCode}
			}
			return err
		},
	}
	f.register(c)
	c.Flags().StringVar(&shell, "shell", "", "a shell command line, run with sh -c")
	c.Flags().StringVar(&cwd, "cwd", "", "working directory (default /workspace)")
	c.Flags().VarP(env, "env", "e", "environment variable NAME=VALUE (repeatable)")
	out.register(c, "the output", valueFormats)
	return c
}

// commandLine is the command of session run: the argv after --, or the
// --shell string. Cobra passes an empty, not a nil, args slice, which would
// otherwise go out as an empty argv beside the shell string.
func commandLine(args []string, shell string) api.CommandLine {
	if len(args) == 0 {
		return api.CommandLine{Shell: shell}
	}
	return api.CommandLine{Argv: args}
}

func newSessionListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		out  output
		page pageFlags
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list sessions, oldest first (or newest first)",
		Example: `  agent2env session ls
  agent2env session ls -o wide --newest --limit 20
  agent2env session ls -o json | jq '.items[] | select(.busy > 0)'`,
		Args: noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			l, err := cl.Sessions().ListPage(ctx, client.ListSessionsOptions{Limit: int(page.limit), Cursor: page.cursor, Order: page.order()})
			if err != nil {
				return view{}, err
			}
			return sessionView(l, l.Items), nil
		}),
	}
	page.register(c, "sessions", "next_cursor", false)
	out.register(c, "table", tableFormats)
	return c
}

func newSessionInfoCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:               "info SESSION_ID [flags]",
		Short:             "show a session: its sandbox, live languages, use and idle deadline",
		Example:           `  agent2env session info demo -o yaml`,
		ValidArgsFunction: cc.complete(e, sessionIDs, false),
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf(c, "need one session id")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			s, err := cl.Sessions().Get(c.Context(), args[0])
			if err != nil {
				return err
			}
			return out.print(e.stdout, sessionView(s, []api.Session{*s}))
		},
	}
	out.register(c, "table", tableFormats)
	return c
}

func newStatsCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:   "stats [flags]",
		Short: "show the daemon's sessions, sandboxes, resources and executions",
		Example: `  agent2env stats
  agent2env stats -o json | jq .resources`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			st, err := cl.Stats(c.Context())
			if err != nil {
				return err
			}
			return out.print(e.stdout, view{value: st, text: func(w io.Writer) error { return writeStats(w, st) }})
		},
	}
	out.register(c, "text", valueFormats)
	return c
}

func writeStats(w io.Writer, st *api.Stats) error {
	t := newTable("WHAT", "VALUE")
	t.add("sessions active", strconv.Itoa(st.Sessions.Active))
	t.add("sessions busy", strconv.Itoa(st.Sessions.Busy))
	statuses := make([]string, 0, len(st.Sandboxes))
	for s := range st.Sandboxes {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	for _, s := range statuses {
		t.add("sandboxes "+s, strconv.Itoa(st.Sandboxes[s]))
	}
	r := st.Resources
	t.add("cpu committed", fmt.Sprintf("%.2f of %.2f", float64(r.MilliCPUCommitted)/1000, float64(r.MilliCPUCapacity)/1000))
	t.add("memory committed", fmt.Sprintf("%s of %s", formatBytes(r.MemoryBytesCommitted), formatBytes(r.MemoryBytesCapacity)))
	t.add("cpu used", fmt.Sprintf("%.1f s", r.CPUSecondsUsed))
	t.add("memory used", formatBytes(r.MemoryBytesUsed))
	x := st.Executions
	t.add("executions", fmt.Sprintf("%d (%d failed)", x.Count, x.Errors))
	t.add("execution time p50 / p95", fmt.Sprintf("%.3f s / %.3f s", x.P50, x.P95))
	return t.write(w, false)
}
