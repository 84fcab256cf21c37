// Package cli implements the agent2env command line on
// github.com/spf13/cobra: the daemon (serve), the in-sandbox agent (agent,
// hidden) and the client commands.
//
// Each command group has one file whose constructor builds its
// *cobra.Command tree; each command's RunE calls one small function.
// Client commands reach the daemon through one clientConfig (config.go:
// --url and --token, the environment, the config file "login" writes)
// and print resources through one output (output.go: -o table|wide|json|
// yaml, -q). A client setting comes from its flag, else the environment,
// else that file. Errors are printed once, by Main: exit code 1 for a
// failure, 2 for a wrong use of a command, 128+n when signal n (SIGINT,
// SIGTERM) interrupted it (signal.go); commands that run the user's own
// command or code pass its exit code on, and exit 124 when it timed out,
// as timeout(1) does.
//
// serve's settings (serveconfig.go, on koanf) come from, in order of
// precedence: its flags, AGENT2ENV_* environment variables, the YAML file
// --config names, and the flags' defaults; --print-config shows each
// setting's value and where it came from. A bad value stops the daemon
// whatever its source, naming that source.
//
// Text the daemon sends can hold what a sandbox wrote, escape sequences
// included: every command's standard output and error write control
// characters visibly (output.go's appendVisible), but for the outputs
// documented as raw — your own command's, downloads, --raw.
//
// The command reference in docs/cli is generated from the tree; regenerate
// it with "make docs" (a test fails when it is out of date).
package cli

//go:generate go test . -run TestCLIReference -update-docs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// env carries the process's streams to commands, and what tests replace.
type env struct {
	stdin          io.Reader // nil: os.Stdin
	stdout, stderr io.Writer
	// lookupEnv reads the environment; nil: os.LookupEnv.
	lookupEnv func(string) (string, bool)
	// poll is how often waits poll the daemon; 0: the SDK's default.
	poll time.Duration
}

func (e env) in() io.Reader {
	if e.stdin == nil {
		return os.Stdin
	}
	return e.stdin
}

// getenv returns the environment variable key; set but empty counts as
// unset.
func (e env) getenv(key string) string {
	lookup := e.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(key)
	return v
}

// Main runs the command line args and returns the exit code: 0, 1 when
// the command failed, 2 when it was used wrongly, 128+n when signal n,
// which cancelled ctx (NotifyContext), interrupted it, or what the command
// chose (sandbox exec passes on the remote command's).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runMain(ctx, env{stdout: stdout, stderr: stderr}, args)
}

// runMain is Main with e's streams.
func runMain(ctx context.Context, e env, args []string) int {
	cmd, err := execute(ctx, e, args)
	return report(e.stderr, cmd, interrupted(ctx, err))
}

// execute runs args on a new command tree and returns the command that
// ran (or failed to parse) and its error, unprinted.
func execute(ctx context.Context, e env, args []string) (*cobra.Command, error) {
	var root *cobra.Command
	if len(args) > 0 && args[0] == "agent" {
		// The runtime starts the agent in every sandbox, on the path of
		// sandbox creation: skip building the other commands.
		root = newBareRoot(e)
		root.AddCommand(newAgentCmd(e))
	} else {
		// What the commands print may go to a terminal: text the
		// daemon sent is written with its control characters made visible
		// (output.go), the outputs documented as raw take the writer
		// under it.
		stdout, stderr := visibleText(e.stdout), visibleText(e.stderr)
		defer stdout.Flush()
		defer stderr.Flush()
		e.stdout, e.stderr = stdout, stderr
		root = newRoot(e)
	}
	// Not nil: cobra would take nil for os.Args.
	root.SetArgs(append([]string{}, legacyFlags(root, args)...))
	return root.ExecuteContextC(ctx)
}

// Command groups in the top-level help.
const (
	groupClient = "client"
	groupDaemon = "daemon"
	groupSetup  = "setup"
)

// newRoot builds the whole command tree.
func newRoot(e env) *cobra.Command {
	root := newBareRoot(e)
	// A group lists its commands; "agent2env sandbox" alone is not a
	// command of its own, so its help shows no usage line for it.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "Usage:{{if .Runnable}}",
		"Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.AddGroup(
		&cobra.Group{ID: groupClient, Title: "Client commands (they talk to a daemon):"},
		&cobra.Group{ID: groupDaemon, Title: "Daemon commands:"},
		&cobra.Group{ID: groupSetup, Title: "Setup commands:"},
	)
	root.SetHelpCommandGroupID(groupSetup)
	root.SetCompletionCommandGroupID(groupSetup)
	addCommands(e, root)
	return root
}

// newBareRoot returns the root command without subcommands: it prints
// nothing of its own, and makes flag errors usage errors.
func newBareRoot(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "agent2env <command>",
		Short: "AI-agent sandboxes as OCI containers: the daemon, its CLI and the in-sandbox agent",
		Long: `agent2env runs sandboxes for AI agents as OCI containers (crun or runc, no Docker engine).
The same binary is the daemon ("agent2env serve"), the client commands below, which talk
to a daemon over its REST API, and the agent inside every sandbox.

What the daemon sends (names, messages, logs, an agent's output) is printed with the control
characters a terminal would act on made visible, as Go writes them in strings (\x1b, \r,
\u009b, \u202e); the output of your own commands (sandbox exec, context exec, session exec
and run), downloads and --raw are written as they came.`,
		Example: `  sudo agent2env serve                       # start the daemon on 127.0.0.1:8080
  ID=$(agent2env sandbox create --image agent2env/python)
  agent2env sandbox exec "$ID" -- python3 -c 'print(1)'
  agent2env sandbox ls -o json | jq '.items[].id'`,
		Args:              cobra.ArbitraryArgs,
		RunE:              needSubcommand,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true, // keeps docs/cli reproducible
	}
	root.SetIn(e.in())
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{cmd: c, err: flagValueError(err)} })
	return root
}

// flagValueError is err, a flag's parse error, saying what value the flag
// wants in place of the parser's own words: pflag passes strconv's and
// time's errors on as they are ("strconv.ParseInt: parsing \"x\": invalid
// syntax"), which name Go functions rather than what to type.
func flagValueError(err error) error {
	invalid := (*pflag.InvalidValueError)(nil)
	if !errors.As(err, &invalid) {
		return err
	}
	want := valueWant(invalid.GetFlag().Value.Type(), err)
	if want == "" {
		return err // a Value of this package's, whose error says it
	}
	// pflag's message ends with its cause's: the first part names the
	// flag as pflag does.
	return errors.New(strings.TrimSuffix(invalid.Error(), invalid.Unwrap().Error()) + want)
}

// valueWant says what a value of a flag of pflag's type typ must be, err
// being why the value given is not one; "" for a type of this package's.
// (mapstructure, decoding serve's settings, formats strconv's error into
// its own rather than wrapping it: the range error is matched by its
// text too.)
func valueWant(typ string, err error) string {
	switch {
	case errors.Is(err, strconv.ErrRange) || strings.Contains(err.Error(), strconv.ErrRange.Error()):
		return "out of range"
	case strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint"):
		return "want a whole number"
	case strings.HasPrefix(typ, "float"):
		return "want a number"
	case typ == "bool":
		return "want true or false"
	case typ == "duration":
		return "want a duration such as 30s or 2m"
	}
	return ""
}

// addCommands adds every command to root.
func addCommands(e env, root *cobra.Command) {
	cc := &clientConfig{}
	cc.register(root)
	for _, c := range []*cobra.Command{
		newSandboxCmd(e, cc), newSnapshotCmd(e, cc), newContextCmd(e, cc), newTemplateCmd(e, cc), newImageCmd(e, cc),
		newPrepullCmd(e, cc), newImportCmd(e, cc), newExportCmd(e, cc), newSessionCmd(e, cc), newStatsCmd(e, cc), newMCPCmd(e, cc),
		newLLMCmd(e, cc),
		newTaskCmd(e, cc),
	} {
		c.GroupID = groupClient
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newServeCmd(e), newAPIKeyCmd(e)} {
		c.GroupID = groupDaemon
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newLoginCmd(e, cc), newVersionCmd(e, cc)} {
		c.GroupID = groupSetup
		root.AddCommand(c)
	}
	root.AddCommand(newAgentCmd(e))
	// Made now rather than at Execute, so that the reference in docs/cli
	// has them too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil {
		c.Example = `  agent2env completion bash | sudo tee /etc/bash_completion.d/agent2env
  agent2env completion zsh > "${fpath[1]}/_agent2env"
  agent2env completion fish > ~/.config/fish/completions/agent2env.fish`
	}
	for _, c := range root.Commands() {
		if c.GroupID != groupClient && c.Name() != "login" && c.Name() != "version" {
			withoutGlobalFlags(c)
		}
	}
}

// withoutGlobalFlags leaves the client flags out of the help of c and its
// subcommands, which do not talk to a daemon.
func withoutGlobalFlags(c *cobra.Command) {
	const section = `{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	c.SetUsageTemplate(strings.Replace(c.UsageTemplate(), section, "", 1))
}

// group returns a command that only groups subcommands: run alone, or with
// an unknown subcommand, it is a usage error listing its commands.
func group(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Example: example, Args: cobra.ArbitraryArgs, RunE: needSubcommand}
	c.AddCommand(subs...)
	return c
}

func needSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageErrorf(c, "need a command")
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which only Find sets
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageErrorf(c, "%s", msg)
}

// usageError is a wrong use of a command, such as a missing argument or a
// malformed flag or configuration value: Main prints it with the command's
// usage and exits 2.
type usageError struct {
	cmd *cobra.Command // whose usage to show; nil shows none
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(c *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: c, err: fmt.Errorf(format, args...)}
}

// exitError makes Main exit with code and print nothing more: the command
// has already said what happened (such as the output of a remote command
// whose exit code this is).
type exitError struct{ code int }

// timeoutExit is the exit code of every command whose command or code
// timed out, as timeout(1)'s.
const timeoutExit = 124

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// report prints err, which cmd returned, once, and returns the exit code.
func report(w io.Writer, cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	if exit := (*exitError)(nil); errors.As(err, &exit) {
		return exit.code
	}
	if sig := (*signalError)(nil); errors.As(err, &sig) {
		return sig.code() // as a shell's for a command the signal killed: nothing printed
	}
	if usage := (*usageError)(nil); errors.As(err, &usage) {
		// An error may carry the daemon's message, which may carry
		// anything.
		fmt.Fprintf(w, "%s: %s\n", commandPath(cmd), visible(err.Error()))
		if c := usage.cmd; c != nil {
			fmt.Fprintf(w, "usage: %s\n", c.UseLine())
			if c.HasAvailableSubCommands() {
				fmt.Fprintf(w, "\ncommands:\n")
				for _, sub := range c.Commands() {
					if sub.IsAvailableCommand() {
						fmt.Fprintf(w, "  %-*s %s\n", sub.NamePadding(), sub.Name(), sub.Short)
					}
				}
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "Run '%s --help' for more.\n", c.CommandPath())
		}
		return 2
	}
	// The top-level command names the failure: "agent2env sandbox: ...".
	for cmd != nil && cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	// Each of several failures (rm of several ids) on a line of its own,
	// each named, each with its next step.
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, err := range errs {
		fmt.Fprintf(w, "%s: %s\n", commandPath(cmd), visible(err.Error()))
		if h := hint(err); h != "" {
			fmt.Fprintf(w, "  %s\n", h)
		}
	}
	return 1
}

// hint returns the next step after err, or "" when there is none to say.
func hint(err error) string {
	var apiErr *client.APIError
	errors.As(err, &apiErr)
	var failed *client.SandboxFailedError
	switch {
	case errors.As(err, &failed) && failed.Status == api.StatusFailed:
		return fmt.Sprintf("remove it with: agent2env sandbox rm %s", failed.ID)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf(`no daemon answers there: start one with "agent2env serve", or give its URL with --url or $%s`, client.EnvURL)
	case errors.Is(err, client.ErrUnauthenticated):
		return fmt.Sprintf(`the daemon wants a token: give it with --token or $%s, or save it with "agent2env login"`, client.EnvToken)
	case apiErr != nil && apiErr.Code == api.CodeSandboxNotReady:
		// The daemon names the sandbox and its status beside its message.
		id, _ := apiErr.Details["sandbox_id"].(string)
		status, _ := apiErr.Details["status"].(string)
		switch {
		case id == "":
		case status == string(api.StatusPaused):
			return fmt.Sprintf("resume it with: agent2env sandbox resume %s", id)
		case status == string(api.StatusSucceeded):
			return fmt.Sprintf("start it again with: agent2env sandbox start %s", id)
		}
	}
	return ""
}

func commandPath(c *cobra.Command) string {
	if c == nil {
		return "agent2env"
	}
	return c.CommandPath()
}

// Positional argument checks, as usage errors.

// noArgs refuses positional arguments. A list that selects by sandbox
// with --sandbox says so for a lone argument, most likely a sandbox's id:
// the sandbox commands take theirs positionally ("sandbox snapshot ls ID").
func noArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if f := c.Flags().Lookup("sandbox"); f != nil && !f.Changed && len(args) == 1 && c.Name() == "ls" {
		return usageErrorf(c, "unexpected argument %q: a sandbox is given as --sandbox %s", args[0], args[0])
	}
	return usageErrorf(c, "unexpected argument %q", args[0])
}

// exactArgs wants n positional arguments; need says what they are. One
// too many is named, as noArgs names it: need would say that what is
// there is missing.
func exactArgs(n int, need string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) > n:
			return usageErrorf(c, "unexpected argument %q", args[n])
		case len(args) < n:
			return usageErrorf(c, "%s", need)
		}
		return nil
	}
}

// minArgs wants at least n positional arguments; need says what they are.
func minArgs(n int, need string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErrorf(c, "%s", need)
		}
		return nil
	}
}

// registerNewest adds --newest to c, a list of what: newest first, as the
// API's order=desc lists.
func registerNewest(c *cobra.Command, newest *bool, what string) {
	c.Flags().BoolVar(newest, "newest", false, "newest "+what+" first")
}

// listOrder is the API's order of a list --newest asks for; without it,
// the daemon's default (oldest first).
func listOrder(newest bool) api.Order {
	if newest {
		return api.OrderDesc
	}
	return ""
}

// pageFlags are the --limit and --cursor flags of a list the daemon
// pages, and its order's: --newest, or --oldest for a list newest first
// by default. Without --limit the list is whole, as the API's is.
type pageFlags struct {
	limit  pageLimit
	cursor string
	// other says the order flag was given: the other order than the
	// list's default.
	other       bool
	newestFirst bool
}

// register adds the flags to c, a list of what whose pages give the next
// page's cursor in their field cursorField; newestFirst says the list is
// newest first by default.
func (p *pageFlags) register(c *cobra.Command, what, cursorField string, newestFirst bool) {
	c.Flags().Var(&p.limit, "limit", "at most `N` "+what+", 1 to "+strconv.Itoa(api.MaxPageSize)+
		" (a page; -o json gives the next page's cursor)")
	c.Flags().StringVar(&p.cursor, "cursor", "", "the page after this `CURSOR` (a previous page's "+cursorField+")")
	p.newestFirst = newestFirst
	if newestFirst {
		c.Flags().BoolVar(&p.other, "oldest", false, "oldest "+what+" first")
	} else {
		registerNewest(c, &p.other, what)
	}
}

// order is the API's order the flags ask for: "" (the daemon's default)
// without the order flag.
func (p *pageFlags) order() api.Order {
	switch {
	case !p.other:
		return ""
	case p.newestFirst:
		return api.OrderAsc
	}
	return api.OrderDesc
}

// pageLimit is the value of --limit: a page size the API takes; 0 when
// the flag is not given.
type pageLimit int

func (l *pageLimit) String() string { return strconv.Itoa(int(*l)) }

func (l *pageLimit) Type() string { return "limit" }

func (l *pageLimit) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > api.MaxPageSize {
		return fmt.Errorf("want a number from 1 to %d", api.MaxPageSize)
	}
	*l = pageLimit(n)
	return nil
}

// legacyFlags rewrites the single-dash long flags that Go's flag package
// accepted before the move to cobra (-json, -image alpine, -help) to the
// double-dash form, so that scripts written for them keep working. Only
// names of flags of the command args run are rewritten, and nothing after
// "--"; commands that parse their own flags do so with parseLeading.
func legacyFlags(root *cobra.Command, args []string) []string {
	c, _, err := root.Find(args)
	if err != nil || c.DisableFlagParsing {
		return args
	}
	return rewriteLegacy(c, args, false)
}

// rewriteLegacy rewrites the single-dash long flags of c in args, up to
// "--", or the first positional argument when leading is set.
func rewriteLegacy(c *cobra.Command, args []string, leading bool) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || (leading && (len(a) < 2 || a[0] != '-')) {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		long := strings.HasPrefix(a, "--")
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		switch {
		case long:
			f = lookupFlag(c, name)
		case len(name) == 1:
			// One letter after one dash is a shorthand (-o json), not a
			// legacy flag: left as it is, its value skipped.
			f = c.Flags().ShorthandLookup(name)
			if f == nil {
				f = c.InheritedFlags().ShorthandLookup(name)
			}
		case name == "help":
			// cobra adds --help only when the command runs, so the
			// lookup below would not find it yet.
			out[i] = "-" + a
			continue
		default:
			if f = lookupFlag(c, name); f != nil {
				out[i] = "-" + a
			}
		}
		// Skip the flag's value, which may start with a dash itself.
		if f != nil && !hasValue && f.NoOptDefVal == "" {
			i++
		}
	}
	return out
}

// parseLeading parses the flags of c (which sets DisableFlagParsing) in
// args: flags may come before and among the first n positional arguments;
// after the nth, or after "--", the arguments are positional as they
// stand, even those that look like flags. It returns the positional
// arguments, or pflag.ErrHelp for --help.
func parseLeading(c *cobra.Command, args []string, n int) ([]string, error) {
	// DisableFlagParsing leaves the inherited flags (--url, --token)
	// unparsed too: they are parsed here with c's own.
	fs := c.Flags()
	fs.AddFlagSet(c.InheritedFlags())
	// Not interspersed: Parse stops at the first positional argument,
	// which the loop takes before parsing the rest again, up to n.
	fs.SetInterspersed(false)
	var pos []string
	for {
		if err := fs.Parse(rewriteLegacy(c, args, true)); err != nil {
			return nil, c.FlagErrorFunc()(c, err)
		}
		if help, _ := fs.GetBool("help"); help {
			return nil, pflag.ErrHelp
		}
		rest := fs.Args()
		if fs.ArgsLenAtDash() >= 0 || len(rest) == 0 || len(pos) == n {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// lookupFlag finds the flag name of c, its own or inherited.
func lookupFlag(c *cobra.Command, name string) *pflag.Flag {
	if f := c.Flags().Lookup(name); f != nil {
		return f
	}
	return c.InheritedFlags().Lookup(name)
}
