// Package cli implements the agent2env command line: the daemon (serve),
// the in-sandbox agent (agent) and the client commands. Each command is a
// type with Run(ctx, args) error.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command is one subcommand.
type Command interface {
	Run(ctx context.Context, args []string) error
}

// env carries the process's streams to commands.
type env struct {
	stdout, stderr io.Writer
}

type entry struct {
	summary string
	hidden  bool
	make    func(env) Command
}

func commands() map[string]entry {
	return map[string]entry{
		"serve":  {summary: "run the daemon", make: func(e env) Command { return &serveCmd{env: e} }},
		"apikey": {summary: "create an API key for the daemon", make: func(e env) Command { return &apikeyCmd{env: e} }},
		"sandbox": {summary: "create, list, run commands in, copy files to, stop, start and remove sandboxes",
			make: func(e env) Command { return &sandboxCmd{env: e} }},
		"image": {summary: "list, pull, build, import and remove images", make: func(e env) Command { return &imageCmd{env: e} }},
		"template": {summary: "create, list, update, version, roll back and export sandbox templates",
			make: func(e env) Command { return &templateCmd{env: e} }},
		"context": {summary: "create code-interpreter contexts, run code in them, list and remove them", make: func(e env) Command { return &contextCmd{env: e} }},
		"prepull": {summary: "fetch images before sandboxes need them", make: func(e env) Command { return &prepullCmd{env: e} }},
		"import":  {summary: "import templates from LiteBoxd YAML", make: func(e env) Command { return &importCmd{env: e} }},
		"export":  {summary: "export templates as LiteBoxd YAML", make: func(e env) Command { return &exportCmd{env: e} }},
		"agent": {summary: "run the in-sandbox agent (started by the runtime)", hidden: true,
			make: func(e env) Command { return &agentCmd{env: e} }},
	}
}

// errUsage marks an error whose message is usage help.
var errUsage = errors.New("usage")

// Main runs the command named by args[0] and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := env{stdout: stdout, stderr: stderr}
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		return 2
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "agent2env: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := c.make(e).Run(ctx, args[1:]); err != nil {
		if exit := (*exitError)(nil); errors.As(err, &exit) {
			return exit.code
		}
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "agent2env %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]entry) {
	fmt.Fprintln(w, "usage: agent2env <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n, c := range cmds {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'agent2env <command> -h' for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(e env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: agent2env %s\n", synopsis)
		if strings.Contains(synopsis, "[flags]") {
			fs.PrintDefaults()
		}
	}
	return fs
}
