package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newSandboxCmd(e env, cc *clientConfig) *cobra.Command {
	return group("sandbox <command>", "create, list, run commands in, copy files to, stop, start and remove sandboxes",
		`  ID=$(agent2env sandbox create --image agent2env/python)
  agent2env sandbox exec "$ID" -- python3 -V
  agent2env sandbox rm "$ID"`,
		newSandboxCreateCmd(e, cc), newSandboxListCmd(e, cc), newSandboxGetCmd(e, cc), newSandboxExecCmd(e, cc), newSandboxShellCmd(e, cc),
		newSandboxCopyCmd(e, cc), newSandboxLogsCmd(e, cc),
		newSandboxTerminalCmd(e, cc),
		removeCmd(e, cc, "ID", "sandbox id", "remove sandboxes",
			`  agent2env sandbox rm "$ID"
  agent2env sandbox ls -o json | jq -r '.items[] | select(.status == "failed") | .id' | xargs -r agent2env sandbox rm`,
			sandboxIDs, func(ctx context.Context, cl *client.Client, id string) error {
				return cl.Sandbox.Delete(ctx, id)
			}),
		newSandboxControlCmd(e, cc, "stop", "stop running sandboxes, keeping their files"),
		newSandboxControlCmd(e, cc, "start", "start stopped sandboxes again"),
		newSandboxControlCmd(e, cc, "restart", "stop and start sandboxes again"),
		newSandboxControlCmd(e, cc, "pause", "pause running sandboxes: their processes frozen in memory, using no CPU"),
		newSandboxControlCmd(e, cc, "resume", "resume paused sandboxes where they were"),
		newSandboxSnapshotCmd(e, cc), newSandboxForkCmd(e, cc),
	)
}

// sandboxView shows sandboxes: the API's value v, a table of sbs.
func sandboxView(v any, sbs []api.Sandbox) view {
	t := newTable("ID", "IMAGE", "STATUS", "CPU", "MEMORY", "AGE", "REASON").withWide("TEMPLATE", "TTL", "EXPIRES", "ACCESS URL")
	ids := make([]string, len(sbs))
	for i, sb := range sbs {
		ids[i] = sb.ID
		tpl := ""
		if sb.Template != "" {
			tpl = fmt.Sprintf("%s:%d", sb.Template, sb.TemplateVersion)
		}
		expires := "never"
		if sb.TTL > 0 {
			expires = sb.ExpiresAt.Format("2006-01-02 15:04:05Z07:00")
		}
		t.add(sb.ID, sb.Image, string(sb.Status), sb.CPU, sb.Memory, age(sb.CreatedAt), sb.Reason,
			orDash(tpl), fmt.Sprintf("%ds", sb.TTL), expires, orDash(sb.AccessURL))
	}
	return view{value: v, ids: ids, table: t}
}

func newSandboxCreateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		req  api.CreateSandboxRequest
		ttl  int
		env  = envFlag{}
		wait bool
		out  output
	)
	c := &cobra.Command{
		Use:   "create [flags]",
		Short: "create a sandbox from --image, --template or --from-snapshot, wait until it runs and print its id",
		Example: `  agent2env sandbox create --image agent2env/python --memory 1Gi --ttl 3600
  agent2env sandbox create --template python-data-science --env DEBUG=true -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return createSandbox(c, e, cc, req, c.Flags().Changed("ttl"), ttl, env, wait, &out)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Image, "image", "", "image to run, such as agent2env/python or alpine:3.20")
	f.StringVar(&req.Template, "template", "", "template to make the sandbox from; --cpu, --memory, --ttl and --env override its values")
	f.StringVar(&req.FromSnapshot, "from-snapshot", "", "make the sandbox from snapshot `ID` (sandbox snapshot create): its processes, memory and files as saved; only --ttl may be given besides")
	f.IntVar(&req.TemplateVersion, "template-version", 0, "template version `N` to use (default: the latest)")
	f.StringVar(&req.CPU, "cpu", "", "CPU limit, such as 1 or 500m (default: the template's or the daemon's)")
	f.StringVar(&req.Memory, "memory", "", "memory limit, such as 512Mi (default: the template's or the daemon's)")
	f.IntVar(&ttl, "ttl", 0, "seconds until the sandbox is removed, 0 for never (default: the template's or the daemon's)")
	f.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	f.BoolVar(&wait, "wait", true, "wait until the sandbox runs; fail with the reason if it fails, remove it if interrupted")
	c.RegisterFlagCompletionFunc("template", cc.complete(e, templateNames, true))
	c.RegisterFlagCompletionFunc("image", cc.complete(e, imageRefs, true))
	out.register(c, "the sandbox's id", tableFormats)
	return c
}

func createSandbox(c *cobra.Command, e env, cc *clientConfig, req api.CreateSandboxRequest, ttlSet bool, ttl int,
	env envFlag, wait bool, out *output) error {
	if err := checkVersion(c, "template-version", req.TemplateVersion); err != nil {
		return err
	}
	switch {
	case req.FromSnapshot != "" && (req.Image != "" || req.Template != "" || req.CPU != "" || req.Memory != "" || len(env) > 0):
		return usageErrorf(c, "--from-snapshot takes only --ttl besides: the rest is the snapshot's")
	case req.Image != "" && req.Template != "":
		return usageErrorf(c, "give --image or --template, not both")
	case req.TemplateVersion > 0 && req.Template == "":
		return usageErrorf(c, "--template-version needs --template")
	case req.Template != "":
		// The overrides merge over the template's values.
		o := api.SandboxOverrides{CPU: req.CPU, Memory: req.Memory, Env: env}
		if ttlSet {
			o.TTL = &ttl
		}
		req = api.CreateSandboxRequest{Template: req.Template, TemplateVersion: req.TemplateVersion}
		if o.CPU != "" || o.Memory != "" || o.TTL != nil || len(o.Env) > 0 {
			req.Overrides = &o
		}
	default:
		req.Env = env
		if ttlSet {
			req.TTL = &ttl
		}
	}
	cl, err := cc.client(e)
	if err != nil {
		return err
	}
	sb, err := cl.Sandbox.Create(c.Context(), req)
	if err != nil {
		return err
	}
	// A sandbox that failed to start is printed as JSON or YAML (which
	// say its status), but its id is not: ID=$(agent2env sandbox create
	// ...) is set to a sandbox that runs, or to nothing. The error names it.
	var failed error
	if wait && sb.Status != api.StatusRunning {
		stop := func() {}
		if sb.Image != "" {
			// A pending sandbox may wait for its image: show how that goes.
			stop = followImage(c.Context(), e, cl, sb.Image)
		}
		ready, err := cl.Sandbox.WaitForReady(c.Context(), sb.ID, 0)
		stop()
		if ready == nil {
			if interruption(c.Context()) != nil {
				// Its id not printed, the sandbox would be left to run
				// unnamed, without end when it has no TTL: it goes with
				// the command. ctx is done, so the removal gets a
				// context of its own, bounded.
				ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context()), 10*time.Second)
				defer cancel()
				cl.Sandbox.Delete(ctx, sb.ID)
			}
			return err
		}
		sb, failed = ready, err
		if failed != nil && !out.structured() {
			return failed
		}
	}
	v := sandboxView(sb, []api.Sandbox{*sb})
	v.text = idText(sb.ID)
	if err := out.print(e.stdout, v); err != nil {
		return err
	}
	return failed
}

// idText prints ids, one a line, as a command's default output.
func idText(ids ...string) func(io.Writer) error {
	return func(w io.Writer) error {
		for _, id := range ids {
			if _, err := fmt.Fprintln(w, id); err != nil {
				return err
			}
		}
		return nil
	}
}

func newSandboxListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		out  output
		page pageFlags
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list sandboxes, oldest first (or newest first)",
		Example: `  agent2env sandbox ls -o wide
  agent2env sandbox ls --newest --limit 20
  agent2env sandbox ls --limit 100 --cursor "$NEXT" -o json
  agent2env sandbox ls -o json | jq -r '.items[] | select(.status == "failed") | .id'
  agent2env sandbox ls -q | xargs -r agent2env sandbox rm`,
		Args: noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			l, err := cl.Sandbox.ListPage(ctx, client.ListSandboxesOptions{Limit: int(page.limit), Cursor: page.cursor, Order: page.order()})
			if err != nil {
				return view{}, err
			}
			return sandboxView(l, l.Items), nil
		}),
	}
	page.register(c, "sandboxes", "nextCursor", false)
	out.register(c, "table", tableFormats)
	return c
}

func newSandboxGetCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:     "get ID [flags]",
		Aliases: []string{"inspect"},
		Short:   "show a sandbox",
		Example: `  agent2env sandbox get "$ID" -o wide
  agent2env sandbox get "$ID" -o json | jq -r .status`,
		Args:              exactArgs(1, "need one sandbox ID"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			sb, err := cl.Sandbox.Get(ctx, args[0])
			if err != nil {
				return view{}, err
			}
			return sandboxView(sb, []api.Sandbox{*sb}), nil
		}),
	}
	out.register(c, "table", tableFormats)
	return c
}

func newSandboxExecCmd(e env, cc *clientConfig) *cobra.Command {
	var req api.ExecRequest
	var timeout time.Duration
	var interactive, tty bool
	env := envFlag{}
	c := &cobra.Command{
		Use:   "exec ID [flags] -- CMD [ARGS...]",
		Short: "run a command in a sandbox, streaming its output",
		Long: `exec runs a command in a sandbox and streams its output, as it came (escape sequences
included: it is your command's). Its exit code is the command's (124 when it timed out).
Flags go before the command; everything from the command on, or after "--", is the command's.
With -i the command reads your standard input; with -t it runs on a terminal whose size
follows yours; with -it, as "sandbox shell" does, your terminal is in raw mode and its keys
go to the command. Either runs it until it ends, without the timeout. Ctrl-C (with -it a key
for the command), SIGTERM or SIGHUP ends the command and exec, which exits as the signal
would have it (130 for Ctrl-C, 143 for SIGTERM).`,
		Example: `  agent2env sandbox exec "$ID" -- python3 -c 'print(1)'
  agent2env sandbox exec "$ID" --timeout 600 --env OMP_NUM_THREADS=1 -- python3 -c 'import numpy; print(numpy.__version__)'
  agent2env sandbox exec -it "$ID" -- bash
  tar c src | agent2env sandbox exec -i "$ID" -- tar x -C /workspace`,
		// The command's arguments may look like flags: parseLeading
		// stops at the command.
		DisableFlagParsing: true,
		ValidArgsFunction:  cc.complete(e, sandboxIDs, false),
		RunE: func(c *cobra.Command, args []string) error {
			pos, err := parseLeading(c, args, 1)
			if err != nil {
				return err
			}
			if len(pos) < 2 {
				return usageErrorf(c, "need a sandbox id and a command")
			}
			req.Command, req.Env = pos[1:], env
			if interactive || tty {
				treq := api.TerminalRequest{Command: req.Command, TTY: tty, Env: req.Env, Cwd: req.Cwd}
				return runTerminal(c, e, cc, pos[0], treq, interactive)
			}
			d, err := runTimeout(c, e, timeout)
			if err != nil {
				return err
			}
			req.Timeout = seconds(d)
			return execSandbox(c, e, cc, pos[0], req)
		},
	}
	f := c.Flags()
	f.BoolVarP(&interactive, "interactive", "i", false, "pass standard input to the command")
	f.BoolVarP(&tty, "tty", "t", false, "run the command on a terminal")
	timeoutVar(f, &timeout, "`SECONDS` (or a duration such as 2m) before the command is killed (default: $"+envRunTimeout+", else the daemon's, 30)")
	f.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	f.StringVar(&req.Cwd, "cwd", "", "working directory (default: the sandbox's, /workspace)")
	return c
}

func execSandbox(c *cobra.Command, e env, cc *clientConfig, id string, req api.ExecRequest) error {
	cl, err := cc.client(e)
	if err != nil {
		return err
	}
	ev, err := cl.Sandbox.ExecuteStream(c.Context(), id, req, raw(e.stdout), raw(e.stderr))
	if err != nil {
		return err
	}
	switch {
	case ev.TimedOut:
		fmt.Fprintf(e.stderr, "%s: the command timed out and was killed\n", c.CommandPath())
		return &exitError{code: timeoutExit}
	case ev.ExitCode == 0:
		return nil
	case ev.ExitCode < 0 || ev.ExitCode > 255:
		// An exit status is one byte: a code outside it would wrap
		// (256 is 0), so it is a plain failure.
		return &exitError{code: 1}
	}
	return &exitError{code: ev.ExitCode}
}

func newSandboxCopyCmd(e env, cc *clientConfig) *cobra.Command {
	return &cobra.Command{
		Use:   "cp [flags] SRC DST",
		Short: "copy a file into (DST is ID:/path) or out of (SRC is ID:/path) a sandbox",
		Long: `cp copies one file into or out of a sandbox. The sandbox side is ID:/path; the local
side is a path, or - for standard input or output (the file's bytes as they are). A DST
ending in / or naming a directory is copied into.`,
		Example: `  agent2env sandbox cp data.csv "$ID:/workspace/"
  agent2env sandbox cp "$ID:/workspace/out.png" .
  tar c src | agent2env sandbox cp - "$ID:/tmp/src.tar"`,
		Args: exactArgs(2, "need SRC and DST, one of them ID:/path and the other a local path or -"),
		RunE: func(c *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := remotePath(args[0])
			dstID, dstPath, dstRemote := remotePath(args[1])
			switch {
			case srcRemote == dstRemote:
				return usageErrorf(c, "exactly one of SRC and DST must be ID:/path")
			case srcRemote && srcPath == "", dstRemote && dstPath == "":
				return usageErrorf(c, "%s names no path in the sandbox: write ID:/path", cmp.Or(srcID, dstID)+":")
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			if dstRemote {
				return upload(c.Context(), e, cl, args[0], dstID, dstPath)
			}
			return download(c.Context(), e, cl, srcID, srcPath, args[1])
		},
	}
}

// remotePath splits an ID:/path argument. A local path whose first
// element contains a colon can be written ./a:b.
func remotePath(arg string) (id, p string, ok bool) {
	id, p, ok = strings.Cut(arg, ":")
	if !ok || id == "" || strings.ContainsAny(id, `/\`) {
		return "", "", false
	}
	return id, p, true
}

// upload copies the local file src (- for standard input) to p in sandbox
// id; a p ending in / or naming a directory of the sandbox is a directory
// to copy into, as cp(1) does.
func upload(ctx context.Context, e env, cl *client.Client, src, id, p string) error {
	var r io.Reader
	var mode os.FileMode
	intoDir := strings.HasSuffix(p, "/") || isRemoteDir(ctx, cl, id, p)
	if src == "-" {
		if intoDir {
			return fmt.Errorf("copy standard input to %s: a directory; name the destination file", p)
		}
		r = e.in()
	} else {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("copy %s: is a directory; only files can be copied", src)
		}
		r, mode = f, fi.Mode().Perm()
		if intoDir {
			p = strings.TrimSuffix(p, "/") + "/" + filepath.Base(src)
		}
	}
	_, err := cl.Sandbox.UploadFile(ctx, id, p, r, mode)
	return err
}

// isRemoteDir says whether p is a directory in sandbox id, or a link to
// one. Any failure says no, and the upload reports what it meets.
func isRemoteDir(ctx context.Context, cl *client.Client, id, p string) bool {
	if p == "" {
		return false
	}
	fi, err := cl.Sandbox.StatFile(ctx, id, p)
	return err == nil && fi.IsDir
}

// download copies p in sandbox id to the local path dst (- for standard
// output); an existing directory dst is copied into.
func download(ctx context.Context, e env, cl *client.Client, id, p, dst string) error {
	if dst != "-" {
		fi, err := os.Stat(dst)
		switch {
		case err == nil && fi.IsDir():
			// path, not filepath: p is the sandbox's, always slashes.
			dst = filepath.Join(dst, path.Base(p))
		case errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(dst, string(filepath.Separator)):
			// A directory that is not there, as cp(1) says of it;
			// os.Create would say "is a directory".
			return fmt.Errorf("copy to %s: %w", dst, syscall.ENOENT)
		}
	}
	rc, err := cl.Sandbox.DownloadFile(ctx, id, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	if dst == "-" {
		_, err := io.Copy(raw(e.stdout), rc)
		return err
	}
	err = replaceFile(dst, func(w io.Writer) error {
		_, err := io.Copy(w, rc)
		return err
	})
	if err != nil {
		return fmt.Errorf("download %s from sandbox %s: %w", p, id, err)
	}
	return nil
}

// replaceFile writes the file dst with write, whole or not at all: to a
// temporary file beside it, renamed over it once write succeeded and
// removed when it failed, so that a download cut short (a lost
// connection, Ctrl-C) leaves no partial file that could pass for the
// whole, nor destroys the file that was there. A file replaced keeps its
// permissions (a link's target is written, as os.Create does); a new one
// gets those of os.Create. What is not a regular file, such as /dev/null
// or a named pipe, is written as it is: it cannot be replaced.
func replaceFile(dst string, write func(io.Writer) error) error {
	if target, err := filepath.EvalSymlinks(dst); err == nil {
		dst = target
	}
	var perm fs.FileMode = 0o666 // less the umask, by OpenFile
	keep := false
	if fi, err := os.Stat(dst); err == nil {
		if !fi.Mode().IsRegular() {
			return writeInPlace(dst, write)
		}
		perm, keep = fi.Mode().Perm(), true
	}
	f, err := createBeside(dst, perm)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil && keep {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// writeInPlace writes the existing file dst with write.
func writeInPlace(dst string, write func(io.Writer) error) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// createBeside creates a new file in the directory of path, named after
// it, with permissions perm less the umask.
func createBeside(path string, perm fs.FileMode) (*os.File, error) {
	dir, name := filepath.Split(path)
	for {
		tmp := filepath.Join(dir, "."+name+"."+rand.Text()[:8]+".part")
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			// The error names the temporary file: say the one the user gave.
			return nil, fmt.Errorf("create %s: %w", path, errors.Unwrap(err))
		}
		return f, nil
	}
}

func newSandboxLogsCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:   "logs ID [flags]",
		Short: "print a sandbox's lifecycle events and console output",
		Long: `logs prints a sandbox's lifecycle events and console output, with the control characters
in them made visible (\x1b); --raw prints them as they came.`,
		Example: `  agent2env sandbox logs "$ID"
  agent2env sandbox logs "$ID" --raw > console.log`,
		Args:              exactArgs(1, "need one sandbox id"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			logs, err := cl.Sandbox.GetLogs(ctx, args[0])
			if err != nil {
				return view{}, err
			}
			return view{value: logs, text: func(w io.Writer) error {
				if logs.EventsDropped > 0 {
					fmt.Fprintf(w, "(%d older events dropped)\n", logs.EventsDropped)
				}
				for _, ev := range logs.Events {
					fmt.Fprintln(w, ev)
				}
				if logs.Logs != "" {
					fmt.Fprintf(w, "\n%s", logs.Logs)
					if !strings.HasSuffix(logs.Logs, "\n") {
						fmt.Fprintln(w)
					}
				}
				return nil
			}}, nil
		}),
	}
	out.register(c, "text", valueFormats)
	out.registerRaw(c, "the console output")
	return c
}

// newSandboxControlCmd makes stop, start, restart, pause or resume. Start
// and restart wait, as create does, until each sandbox runs again.
func newSandboxControlCmd(e env, cc *clientConfig, op, short string) *cobra.Command {
	var wait bool
	c := &cobra.Command{
		Use:               op + " ID... [flags]",
		Short:             short,
		Example:           fmt.Sprintf(`  agent2env sandbox %s "$ID"`, op),
		Args:              minArgs(1, "need at least one sandbox id"),
		ValidArgsFunction: cc.complete(e, sandboxIDs, true),
		RunE: func(c *cobra.Command, ids []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			do := map[string]func(context.Context, string) error{
				"stop": cl.Sandbox.Stop, "start": cl.Sandbox.Start, "restart": cl.Sandbox.Restart,
				"pause": dropSandbox(cl.Sandbox.Pause), "resume": dropSandbox(cl.Sandbox.Resume),
			}[op]
			return forEach(e, ids, func(id string) error {
				if err := do(c.Context(), id); err != nil {
					return err
				}
				if wait {
					_, err := cl.Sandbox.WaitForReady(c.Context(), id, 0)
					return err
				}
				return nil
			})
		},
	}
	if op == "start" || op == "restart" {
		c.Flags().BoolVar(&wait, "wait", true, "wait until the sandbox runs again; fail with the reason if it fails")
	}
	return c
}

// dropSandbox drops the sandbox fn returns, which the commands print only
// the id of.
func dropSandbox(fn func(context.Context, string) (*api.Sandbox, error)) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		_, err := fn(ctx, id)
		return err
	}
}

// removeCmd is every "rm" command: it removes each argument with del.
// what names the argument in usage ("ID"); noun in errors; list completes
// it.
func removeCmd(e env, cc *clientConfig, what, noun, short, example string, list lister,
	del func(ctx context.Context, cl *client.Client, arg string) error) *cobra.Command {
	return &cobra.Command{
		Use:               "rm " + what + "... [flags]",
		Aliases:           []string{"remove"},
		Short:             short,
		Long:              short + ", printing each one removed. A failure does not stop the others; any makes the exit code 1.",
		Example:           example,
		Args:              minArgs(1, "need at least one "+noun),
		ValidArgsFunction: cc.complete(e, list, true),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			return forEach(e, args, func(arg string) error { return del(c.Context(), cl, arg) })
		},
	}
}

// forEach does do for each of args, printing those done, and reports
// every failure rather than stopping at the first.
func forEach(e env, args []string, do func(arg string) error) error {
	var errs []error
	for _, a := range args {
		if err := do(a); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(e.stdout, a)
	}
	return errors.Join(errs...)
}

// envFlag collects repeated KEY=VALUE flags. Unlike pflag's
// stringToString it takes one pair a flag, so that values may hold commas.
type envFlag map[string]string

func (f envFlag) Type() string { return "KEY=VALUE" }

func (f envFlag) String() string {
	kvs := make([]string, 0, len(f))
	for k, v := range f {
		kvs = append(kvs, k+"="+v)
	}
	sort.Strings(kvs)
	return strings.Join(kvs, ",")
}

func (f envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	f[k] = v
	return nil
}

// checkVersion refuses a template version flag given below 1: 0 is only
// its default, the latest version.
func checkVersion(c *cobra.Command, flag string, v int) error {
	if v < 0 || v == 0 && c.Flags().Changed(flag) {
		return usageErrorf(c, "--%s must be at least 1", flag)
	}
	return nil
}
