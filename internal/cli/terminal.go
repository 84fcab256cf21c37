package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newSandboxShellCmd(e env, cc *clientConfig) *cobra.Command {
	env := envFlag{}
	var cwd string
	c := &cobra.Command{
		Use:   "shell ID [flags] [-- CMD [ARGS...]]",
		Short: "open an interactive terminal in a sandbox",
		Long: `shell runs the sandbox user's login shell (or CMD) on a terminal in the sandbox and connects
it to yours: your terminal is in raw mode while it runs and its size follows yours. The exit
code is the shell's (128+n when signal n ended it). The shell ends when you leave it.`,
		Example: `  agent2env sandbox shell "$ID"
  agent2env sandbox shell "$ID" -- python3`,
		DisableFlagParsing: true,
		ValidArgsFunction:  cc.complete(e, sandboxIDs, false),
		RunE: func(c *cobra.Command, args []string) error {
			pos, err := parseLeading(c, args, 1)
			if err != nil {
				return err
			}
			if len(pos) < 1 {
				return usageErrorf(c, "need a sandbox id")
			}
			req := api.TerminalRequest{Command: pos[1:], TTY: true, Env: env, Cwd: cwd}
			return runTerminal(c, e, cc, pos[0], req, true)
		},
	}
	f := c.Flags()
	f.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	f.StringVar(&cwd, "cwd", "", "working directory (default: the sandbox's, /workspace)")
	return c
}

// runTerminal runs req in sandbox id on a terminal of the daemon's,
// connected to e's standard streams (stdin only when withStdin), and
// returns the remote exit code as an exitError.
func runTerminal(c *cobra.Command, e env, cc *clientConfig, id string, req api.TerminalRequest, withStdin bool) error {
	cl, err := cc.client(e)
	if err != nil {
		return err
	}
	in := e.in()
	fd := -1
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd = int(f.Fd())
	}
	if req.TTY && fd >= 0 {
		if cols, rows, err := term.GetSize(fd); err == nil && rows > 0 && cols > 0 {
			req.Rows, req.Cols = uint16(rows), uint16(cols)
		}
	}
	var opts client.TerminalOptions
	if !req.TTY {
		opts.Stderr = raw(e.stderr)
	}
	t, err := cl.Sandbox.Terminal(c.Context(), id, req, opts)
	if err != nil {
		return err
	}
	defer t.Close()
	if req.TTY && fd >= 0 {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer term.Restore(fd, old)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if cols, rows, err := term.GetSize(fd); err == nil && rows > 0 && cols > 0 {
					t.Resize(uint16(rows), uint16(cols))
				}
			}
		}()
	}
	if withStdin {
		go func() {
			if _, err := io.Copy(t, in); err == nil {
				t.CloseWrite()
			}
		}()
	} else if !req.TTY {
		t.CloseWrite() // a pipe's end; a tty gets nothing (an end-of-file character would end a shell)
	}
	if _, err := io.Copy(raw(e.stdout), t); err != nil {
		return err
	}
	exit, err := t.Wait()
	if err != nil {
		return err
	}
	if exit.ExitCode == 0 {
		return nil
	}
	if exit.ExitCode < 0 || exit.ExitCode > 255 {
		return &exitError{code: 1}
	}
	return &exitError{code: exit.ExitCode}
}
