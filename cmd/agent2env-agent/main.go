// Command agent2env-agent is the in-sandbox agent alone: what
// "agent2env agent" runs, without the daemon and the CLI, for a runtime
// that copies the agent into every sandbox (the kubernetes runtime's Pods
// copy it out of the agent2env image, which holds it next to agent2env).
// It links internal/agent only: a fifteenth of agent2env's size, so the
// copy and its start cost little, and idle it holds a fifth of the memory
// (no other package's init data on its heap): the oci runtime runs it
// instead of agent2env when it sits beside the daemon's binary.
//
//	agent2env-agent [agent] [--uid N] [--gid N] [--cwd DIR]   run the agent
//	agent2env-agent install DST                       copy this binary to DST
//	agent2env-agent hold                              wait for SIGTERM, exit 0
//	agent2env-agent netcheck listen PORT              accept TCP connections on PORT
//	agent2env-agent netcheck connect ADDR SECONDS     connect to ADDR every second;
//	                                                  exit 0 if the last one connected
//
// netcheck is the kubernetes runtime's probe of whether the cluster
// enforces NetworkPolicies (a Pod pair of the agent2env image, which has
// no other tools).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agent2env/agent2env/internal/agent"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  agent2env-agent [agent] [--uid N] [--gid N] [--cwd DIR]
                                                    run the in-sandbox agent (as "agent2env agent")
  agent2env-agent install DST                       copy this binary to DST and exit
  agent2env-agent hold                              wait for SIGTERM or SIGINT, then exit 0
  agent2env-agent netcheck listen PORT              accept TCP connections on PORT, close them
  agent2env-agent netcheck connect ADDR SECONDS     connect to ADDR every second for SECONDS;
                                                    exit 0 if the last attempt connected
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "install":
			if len(args) != 2 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			if err := agent.Install(args[1]); err != nil {
				fmt.Fprintln(stderr, "agent2env-agent:", err)
				return 1
			}
			return 0
		case "hold":
			return hold(nil)
		case "netcheck":
			return netcheck(args[1:], stdout, stderr)
		case "help":
			fmt.Fprint(stdout, usage)
			return 0
		case "agent":
			// The command line of "agent2env agent": the oci runtime
			// starts either binary with it (internal/runtime/oci).
			args = args[1:]
		}
	}
	opts := agent.Options{}
	fs := flag.NewFlagSet("agent2env-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	// The flags of "agent2env agent" (internal/cli), with its defaults.
	fs.IntVar(&opts.UID, "uid", 1000, "user id commands run as (-1: the agent's own)")
	fs.IntVar(&opts.GID, "gid", 1000, "group id commands run as")
	fs.StringVar(&opts.Cwd, "cwd", "/workspace", "default working directory")
	fs.StringVar(&opts.SpareKernel, "spare-kernel", "", "start a kernel of this language at once, for the first kernel request to adopt")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agent2env-agent: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	opts.Log = slog.New(slog.NewTextHandler(stderr, nil))
	if err := agent.Run(ctx, opts); err != nil {
		fmt.Fprintln(stderr, "agent2env-agent:", err)
		return 1
	}
	return 0
}

// hold is the kubernetes runtime's agent container: its start hook
// installs the agent, then it idles until the Pod ends, and exits 0 on
// SIGTERM or SIGINT. ready, when set, is called once they are caught.
func hold(ready func()) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if ready != nil {
		ready()
	}
	<-stop
	return 0
}
