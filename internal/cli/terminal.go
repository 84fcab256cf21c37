package cli

import (
	"context"
	"errors"
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
	var cwd, name string
	var takeover, readOnly bool
	c := &cobra.Command{
		Use:   "shell ID [flags] [-- CMD [ARGS...]]",
		Short: "open an interactive terminal in a sandbox",
		Long: `shell runs the sandbox user's login shell (or CMD) on a terminal in the sandbox and connects
it to yours: your terminal is in raw mode while it runs and its size follows yours. The exit
code is the shell's (128+n when signal n ended it). The shell ends when you leave it, or when
the CLI gets SIGTERM or SIGHUP (it exits 128+n then); your keys, Ctrl-C too, go to the shell.

With --name the terminal is persistent: it is made if the sandbox has no running terminal of
that name (with CMD, or the login shell), and attached to otherwise, its recent output (up to
1 MiB) replayed first. Type ~. at the start of a line to detach: the terminal goes on in the
sandbox, with what it runs, until you attach again with the same --name (from anywhere, after
a lost connection too), it exits, "sandbox terminal rm" ends it, or the sandbox ends (SIGTERM
or SIGHUP detaches as ~. does). Type ~~ to send one ~. One client at a time types into a
terminal: --takeover takes its place from another, --read-only watches beside it.`,
		Example: `  agent2env sandbox shell "$ID"
  agent2env sandbox shell "$ID" -- python3
  agent2env sandbox shell "$ID" --name work
  agent2env sandbox shell "$ID" --name work --takeover`,
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
			if name == "" {
				if takeover || readOnly {
					return usageErrorf(c, "--takeover and --read-only need --name")
				}
				req := api.TerminalRequest{Command: pos[1:], TTY: true, Env: env, Cwd: cwd}
				return runTerminal(c, e, cc, pos[0], req, true)
			}
			if takeover && readOnly {
				return usageErrorf(c, "--takeover and --read-only exclude each other")
			}
			req := api.CreateTerminalRequest{Name: name, Command: pos[1:], Env: env, Cwd: cwd}
			return runPersistent(c, e, cc, pos[0], req, client.AttachOptions{Takeover: takeover, ReadOnly: readOnly})
		},
	}
	f := c.Flags()
	f.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	f.StringVar(&cwd, "cwd", "", "working directory (default: the sandbox's, /workspace)")
	f.StringVar(&name, "name", "", "make or attach to the persistent terminal of this `NAME`")
	f.BoolVar(&takeover, "takeover", false, "with --name: take the place of the client typing into the terminal")
	f.BoolVar(&readOnly, "read-only", false, "with --name: watch the terminal without typing into it")
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
	fd := terminalFd(e)
	if req.TTY {
		req.Rows, req.Cols = terminalSize(fd)
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
	_, err = drive(c.Context(), e, t, fd, driveOptions{tty: req.TTY, stdin: withStdin})
	return err
}

// runPersistent attaches e's terminal to persistent terminal req.Name of
// sandbox id, made from req when none of that name runs, until its
// process exits (its exit code is the CLI's) or ~. detaches.
func runPersistent(c *cobra.Command, e env, cc *clientConfig, id string, req api.CreateTerminalRequest, opts client.AttachOptions) error {
	cl, err := cc.client(e)
	if err != nil {
		return err
	}
	ctx := c.Context()
	fd := terminalFd(e)
	info, err := cl.Sandbox.GetTerminal(ctx, id, req.Name)
	switch {
	case errors.Is(err, client.ErrNotFound) || err == nil && !info.Running:
		if opts.ReadOnly {
			return fmt.Errorf("sandbox %s has no running terminal %s to watch", id, req.Name)
		}
		req.Rows, req.Cols = terminalSize(fd)
		// Another client may make it first: attaching is what it wants.
		if _, err := cl.Sandbox.CreateTerminal(ctx, id, req); err != nil && !errors.Is(err, client.ErrAlreadyExists) {
			return err
		}
	case err != nil:
		return err
	}
	t, err := cl.Sandbox.AttachTerminal(ctx, id, req.Name, opts)
	if errors.Is(err, client.ErrConflict) && !errors.Is(err, client.ErrAlreadyExists) {
		return fmt.Errorf("%w\n(another client is typing into it: --takeover takes its place, --read-only watches)", err)
	}
	if err != nil {
		return err
	}
	defer t.Close()
	detached, err := drive(ctx, e, t, fd, driveOptions{tty: true, stdin: true, attached: true, readOnly: opts.ReadOnly})
	if sig := (*signalError)(nil); detached || errors.As(err, &sig) {
		fmt.Fprintf(e.stderr, "\r\ndetached from terminal %s; it goes on: agent2env sandbox shell %s --name %s attaches again\r\n", req.Name, id, req.Name)
		return err // nil for ~., the signal's exit code for a signal
	}
	if errors.Is(err, client.ErrTerminalTakenOver) {
		// The error goes on a line of its own, after what the terminal
		// last drew; in it, a line break would part it from its prefix.
		fmt.Fprint(e.stderr, "\r\n")
		return fmt.Errorf("%w: detached from terminal %s", err, req.Name)
	}
	return err
}

// terminalFd is the descriptor of e's standard input when it is a
// terminal, or -1.
func terminalFd(e env) int {
	if f, ok := e.in().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return int(f.Fd())
	}
	return -1
}

// terminalSize is the size of terminal fd, or 0 x 0 (the daemon's
// default) when it has none.
func terminalSize(fd int) (rows, cols uint16) {
	if fd < 0 {
		return 0, 0
	}
	if c, r, err := term.GetSize(fd); err == nil && r > 0 && c > 0 {
		return uint16(r), uint16(c)
	}
	return 0, 0
}

// driveOptions say how drive connects a terminal.
type driveOptions struct {
	// tty: the remote process has a tty, whose size follows e's
	// terminal; stdin: e's input is copied to it. With both, e's
	// terminal is put in raw mode: its keys, Ctrl-C too, go to the
	// process. A tty without stdin leaves e's terminal as it is, as
	// docker exec -t does: Ctrl-C interrupts the CLI.
	tty, stdin bool
	// attached: an attachment to a persistent terminal, whose size is
	// set at once and which ~. detaches from; readOnly: its input is not
	// taken (keystrokes only detach), nor resizes.
	attached, readOnly bool
}

// drive connects t to e's streams, and e's terminal fd (-1: none), until
// t's output ends, as opts say. It returns whether ~. detached, or else
// the remote exit code as an exitError. A signal that cancels ctx
// (SIGINT, SIGTERM: NotifyContext), or SIGHUP, closes t — which ends a
// one-shot terminal's process and detaches from a persistent one — and
// is returned as a *signalError.
func drive(ctx context.Context, e env, t *client.Terminal, fd int, opts driveOptions) (detached bool, err error) {
	// SIGHUP is watched here only: serve reloads on it.
	ctx, stop := notifyContext(ctx, syscall.SIGHUP)
	defer stop()
	defer context.AfterFunc(ctx, func() { t.Close() })()
	if opts.tty && fd >= 0 {
		if opts.stdin {
			old, err := term.MakeRaw(fd)
			if err != nil {
				return false, fmt.Errorf("put the terminal in raw mode: %w", err)
			}
			defer term.Restore(fd, old)
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		if opts.attached && !opts.readOnly { // the terminal may have another size
			winch <- syscall.SIGWINCH
		}
		go func() {
			for range winch {
				if rows, cols := terminalSize(fd); rows > 0 && !opts.readOnly {
					t.Resize(rows, cols)
				}
			}
		}()
	}
	detach := make(chan struct{})
	if opts.stdin {
		go func() {
			var w io.Writer = t
			if opts.attached {
				if opts.readOnly {
					w = io.Discard
				}
				w = &escapeWriter{w: w, detach: func() { close(detach); t.Close() }}
			}
			if _, err := io.Copy(w, e.in()); err == nil && !opts.attached {
				t.CloseWrite()
			}
		}()
	} else if !opts.tty {
		t.CloseWrite() // a pipe's end; a tty gets nothing (an end-of-file character would end a shell)
	}
	_, err = io.Copy(raw(e.stdout), t)
	select {
	case <-detach:
		return true, nil
	default:
	}
	if sig := interruption(ctx); sig != nil {
		return false, sig
	}
	if err != nil {
		return false, err
	}
	exit, err := t.Wait()
	if sig := interruption(ctx); err != nil && sig != nil {
		return false, sig
	}
	if err != nil {
		return false, err
	}
	if exit.ExitCode == 0 {
		return false, nil
	}
	if exit.ExitCode < 0 || exit.ExitCode > 255 {
		return false, &exitError{code: 1}
	}
	return false, &exitError{code: exit.ExitCode}
}

// errDetached ends the copy of keystrokes at ~.
var errDetached = errors.New("detached")

// escapeWriter passes keystrokes on to w but for ssh's escapes: at the
// start of a line, ~. detaches (detach is called) and ~~ sends one ~; a
// ~ followed by anything else is sent with it.
type escapeWriter struct {
	w      io.Writer
	detach func()
	// midLine is set after a keystroke that does not end a line; tilde
	// while a ~ at a line's start waits for the next.
	midLine, tilde bool
	buf            []byte
}

func (ew *escapeWriter) Write(p []byte) (int, error) {
	ew.buf = ew.buf[:0]
	for _, b := range p {
		if ew.tilde {
			ew.tilde = false
			switch b {
			case '.':
				if len(ew.buf) > 0 {
					ew.w.Write(ew.buf)
				}
				ew.detach()
				return len(p), errDetached
			case '~':
				ew.buf = append(ew.buf, '~')
				ew.midLine = true
				continue
			}
			ew.buf = append(ew.buf, '~')
		} else if !ew.midLine && b == '~' {
			ew.tilde = true
			continue
		}
		ew.buf = append(ew.buf, b)
		ew.midLine = b != '\r' && b != '\n'
	}
	if len(ew.buf) == 0 {
		return len(p), nil
	}
	if _, err := ew.w.Write(ew.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
