package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// sandboxCmd groups the sandbox client commands.
type sandboxCmd struct {
	env
	// stdin is what "cp - ID:/path" uploads; nil means os.Stdin.
	stdin io.Reader
}

func (c *sandboxCmd) Run(ctx context.Context, args []string) error {
	return runGroup(ctx, c.env, "sandbox", args, map[string]subcommand{
		"create": {"create [flags]", "create a sandbox from --image or --template, wait until it runs and print its id", c.create},
		"ls":     {"ls [flags]", "list sandboxes", c.list},
		"exec":   {"exec ID [flags] -- CMD [ARGS...]", "run a command in a sandbox, streaming its output", c.exec},
		"cp":     {"cp [flags] SRC DST", "copy a file into (DST is ID:/path) or out of (SRC is ID:/path) a sandbox", c.cp},
		"logs":   {"logs ID [flags]", "print a sandbox's lifecycle events and console output", c.logs},
		"rm":     {"rm ID... [flags]", "remove sandboxes", c.rm},
		"stop": {"stop ID... [flags]", "stop running sandboxes, keeping their files", func(ctx context.Context, name string, args []string) error {
			return c.control(ctx, name, args, "stop")
		}},
		"start": {"start ID... [flags]", "start stopped sandboxes again", func(ctx context.Context, name string, args []string) error {
			return c.control(ctx, name, args, "start")
		}},
		"restart": {"restart ID... [flags]", "stop and start sandboxes again", func(ctx context.Context, name string, args []string) error {
			return c.control(ctx, name, args, "restart")
		}},
	})
}

func (c *sandboxCmd) create(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	image := fs.String("image", "", "image to run, such as agent2env/python or alpine:3.20")
	template := fs.String("template", "", "template to make the sandbox from; --cpu, --memory, --ttl and --env override its values")
	version := fs.Int("template-version", 0, "template version `N` to use (default: the latest)")
	cpu := fs.String("cpu", "", "CPU limit, such as 1 or 500m (default: the template's or the daemon's)")
	memory := fs.String("memory", "", "memory limit, such as 512Mi (default: the template's or the daemon's)")
	ttl := fs.Int("ttl", 0, "seconds until the sandbox is removed, 0 for never (default: the template's or the daemon's)")
	env := envFlag{}
	fs.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	wait := fs.Bool("wait", true, "wait until the sandbox runs; fail with the reason if it fails")
	asJSON := fs.Bool("json", false, "print the sandbox as JSON instead of its id")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	var ttlSet bool
	fs.Visit(func(f *flag.Flag) { ttlSet = ttlSet || f.Name == "ttl" })
	var req api.CreateSandboxRequest
	switch {
	case *image != "" && *template != "":
		return usageError(c.env, fs, "give --image or --template, not both")
	case *version < 0:
		return usageError(c.env, fs, "--template-version must be at least 1")
	case *version > 0 && *template == "":
		return usageError(c.env, fs, "--template-version needs --template")
	case *template != "":
		req = api.CreateSandboxRequest{Template: *template, TemplateVersion: *version}
		// The env override merges over the template's env.
		o := api.SandboxOverrides{CPU: *cpu, Memory: *memory, Env: env}
		if ttlSet {
			o.TTL = ttl
		}
		if o.CPU != "" || o.Memory != "" || o.TTL != nil || len(o.Env) > 0 {
			req.Overrides = &o
		}
	default:
		req = api.CreateSandboxRequest{Image: *image, CPU: *cpu, Memory: *memory, Env: env}
		if ttlSet {
			req.TTL = ttl
		}
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	sb, err := cl.Sandbox.Create(ctx, req)
	if err != nil {
		return err
	}
	// A failed sandbox is still printed, so that scripts can remove it.
	var failed error
	if *wait && sb.Status != api.StatusRunning {
		ready, err := cl.Sandbox.WaitForReady(ctx, sb.ID, 0)
		if ready == nil {
			return err
		}
		sb, failed = ready, err
	}
	if *asJSON {
		if err := printJSON(c.stdout, sb); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.stdout, sb.ID)
	}
	return failed
}

func (c *sandboxCmd) list(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	sbs, err := cl.Sandbox.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, api.List[api.Sandbox]{Items: sbs})
	}
	tw := table(c.stdout, "ID", "IMAGE", "STATUS", "CPU", "MEMORY", "AGE", "REASON")
	for _, sb := range sbs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Image, sb.Status, sb.CPU, sb.Memory, age(sb.CreatedAt), sb.Reason)
	}
	return tw.Flush()
}

func (c *sandboxCmd) exec(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "ID [flags] -- CMD [ARGS...]", &cn)
	timeout := fs.Int("timeout", 0, "seconds before the command is killed (default: the daemon's, 30)")
	env := envFlag{}
	fs.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	cwd := fs.String("cwd", "", "working directory (default: the sandbox's, /workspace)")
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usageError(c.env, fs, "need a sandbox id and a command")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	req := api.ExecRequest{Command: pos[1:], Timeout: *timeout, Env: env, Cwd: *cwd}
	ev, err := cl.Sandbox.ExecuteStream(ctx, pos[0], req, c.stdout, c.stderr)
	if err != nil {
		return err
	}
	switch {
	case ev.TimedOut:
		fmt.Fprintf(c.stderr, "agent2env %s: the command timed out and was killed\n", name)
		return &exitError{code: 124} // as timeout(1) does
	case ev.ExitCode == 0:
		return nil
	case ev.ExitCode < 0 || ev.ExitCode > 255:
		return &exitError{code: 1}
	}
	return &exitError{code: ev.ExitCode}
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

func (c *sandboxCmd) cp(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags] SRC DST", &cn)
	pos, err := positional(c.env, fs, args, 2, "need SRC and DST, one of them ID:/path and the other a local path or -")
	if err != nil {
		return err
	}
	srcID, srcPath, srcRemote := remotePath(pos[0])
	dstID, dstPath, dstRemote := remotePath(pos[1])
	if srcRemote == dstRemote {
		return usageError(c.env, fs, "exactly one of SRC and DST must be ID:/path")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	if dstRemote {
		return c.upload(ctx, cl, pos[0], dstID, dstPath)
	}
	return c.download(ctx, cl, srcID, srcPath, pos[1])
}

// upload copies the local file src (- for standard input) to p in sandbox
// id; a p ending in / is a directory to copy into.
func (c *sandboxCmd) upload(ctx context.Context, cl *client.Client, src, id, p string) error {
	var r io.Reader
	var mode os.FileMode
	if src == "-" {
		if strings.HasSuffix(p, "/") {
			return fmt.Errorf("copy standard input to %s: name the destination file", p)
		}
		r = c.stdin
		if r == nil {
			r = os.Stdin
		}
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
		if strings.HasSuffix(p, "/") {
			p += filepath.Base(src)
		}
	}
	_, err := cl.Sandbox.UploadFile(ctx, id, p, r, mode)
	return err
}

// download copies p in sandbox id to the local path dst (- for standard
// output); an existing directory dst is copied into.
func (c *sandboxCmd) download(ctx context.Context, cl *client.Client, id, p, dst string) error {
	rc, err := cl.Sandbox.DownloadFile(ctx, id, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	if dst == "-" {
		_, err := io.Copy(c.stdout, rc)
		return err
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, path.Base(p))
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("download %s from sandbox %s: %w", p, id, err)
	}
	return nil
}

func (c *sandboxCmd) logs(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "ID [flags]", &cn)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := positional(c.env, fs, args, 1, "need one sandbox id")
	if err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	logs, err := cl.Sandbox.GetLogs(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, logs)
	}
	for _, ev := range logs.Events {
		fmt.Fprintln(c.stdout, ev)
	}
	if logs.Logs != "" {
		fmt.Fprintf(c.stdout, "\n%s", logs.Logs)
		if !strings.HasSuffix(logs.Logs, "\n") {
			fmt.Fprintln(c.stdout)
		}
	}
	return nil
}

func (c *sandboxCmd) rm(ctx context.Context, name string, args []string) error {
	return removeEach(ctx, c.env, name, "ID", "sandbox id", args,
		func(ctx context.Context, cl *client.Client, id string) error { return cl.Sandbox.Delete(ctx, id) })
}

// control stops, starts or restarts the sandboxes named by args. Start and
// restart wait, as create does, until each sandbox runs again.
func (c *sandboxCmd) control(ctx context.Context, name string, args []string, op string) error {
	var cn conn
	fs := clientFlags(c.env, name, "ID... [flags]", &cn)
	wait := new(bool)
	if op != "stop" {
		wait = fs.Bool("wait", true, "wait until the sandbox runs again; fail with the reason if it fails")
	}
	ids, err := parseArgs(fs, args, -1)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usageError(c.env, fs, "need at least one sandbox id")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	do := map[string]func(context.Context, string) error{
		"stop": cl.Sandbox.Stop, "start": cl.Sandbox.Start, "restart": cl.Sandbox.Restart,
	}[op]
	// Do what can be done and report every failure.
	var errs []error
	for _, id := range ids {
		if err := do(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		if *wait {
			if _, err := cl.Sandbox.WaitForReady(ctx, id, 0); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		fmt.Fprintln(c.stdout, id)
	}
	return errors.Join(errs...)
}
