package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// contextCmd groups the code-interpreter context commands.
type contextCmd struct {
	env
	// stdin is what "exec ID" and "exec ID -" run; nil means os.Stdin.
	stdin io.Reader
}

func (c *contextCmd) Run(ctx context.Context, args []string) error {
	return runGroup(ctx, c.env, "context", args, map[string]subcommand{
		"create": {"create [flags]", "create a code-interpreter context (python, javascript or bash) and print its id", c.create},
		"exec":   {"exec CONTEXT_ID [CODE|-] [flags]", "run code in a context, from CODE or standard input, streaming its output", c.exec},
		"ls":     {"ls [flags]", "list contexts", c.list},
		"rm":     {"rm CONTEXT_ID... [flags]", "remove contexts", c.rm},
	})
}

func (c *contextCmd) create(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	language := fs.String("language", "", "interpreter: python, javascript or bash (default: the daemon's, python)")
	session := fs.String("session", "", "session `NAME`: contexts of one live session share a sandbox and its files")
	workdir := fs.String("workdir", "", "working `DIR` of the interpreter (default: the daemon's, /workspace)")
	sandbox := fs.String("sandbox", "", "put the context in the existing sandbox `ID`")
	template := fs.String("template", "", "template of the sandbox made for the context (default: the language's)")
	env := envFlag{}
	fs.Var(env, "env", "environment variable `KEY=VALUE` of the interpreter (repeatable)")
	asJSON := fs.Bool("json", false, "print the context as JSON instead of its id")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	if *sandbox != "" && *template != "" {
		return usageError(c.env, fs, "give --sandbox or --template, not both")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	req := api.CreateContextRequest{Language: *language, SessionName: *session, WorkingDir: *workdir,
		Template: *template, Env: env}
	var cx *client.Context
	if *sandbox != "" {
		cx, err = cl.Contexts().CreateIn(ctx, *sandbox, req)
	} else {
		cx, err = cl.Contexts().Create(ctx, req)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, cx.Context)
	}
	fmt.Fprintln(c.stdout, cx.ContextID)
	return nil
}

func (c *contextCmd) exec(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "CONTEXT_ID [CODE|-] [flags]", &cn)
	timeout := fs.Duration("timeout", 0, "time before the execution is interrupted, such as 2m; the context stays usable (default: the daemon's, 30s)")
	asJSON := fs.Bool("json", false, "print the response as JSON once the code has finished, instead of streaming its output")
	pos, err := parseArgs(fs, args, 2)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || len(pos) > 2:
		return usageError(c.env, fs, "need a context id and at most one CODE argument (none or - reads the code from standard input)")
	case *timeout < 0:
		return usageError(c.env, fs, "--timeout must not be negative")
	}
	var code string
	if len(pos) == 2 && pos[1] != "-" {
		code = pos[1]
	} else {
		r := c.stdin
		if r == nil {
			r = os.Stdin
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("read code from standard input: %w", err)
		}
		code = string(b)
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	req := api.ExecuteRequest{Code: code}
	client.WithRunTimeout(*timeout)(&req)
	if *asJSON {
		res, err := cl.Contexts().Execute(ctx, pos[0], req)
		if err != nil {
			return err
		}
		if err := printJSON(c.stdout, res); err != nil {
			return err
		}
		if !res.Success {
			return &exitError{code: 1}
		}
		return nil
	}
	stdout, stderr := &lineWriter{w: c.stdout}, &lineWriter{w: c.stderr}
	var results, failed bool
	h := client.StreamHandler{
		OnStdout: func(s string) { io.WriteString(stdout, s) },
		OnStderr: func(s string) { io.WriteString(stderr, s) },
		OnResult: func(r api.ExecutionResult) {
			results = true
			printResult(stdout, r)
		},
		OnError: func(e api.ExecutionError) {
			failed = true
			printExecutionError(stderr, e)
		},
	}
	res, err := cl.Contexts().ExecuteStream(ctx, pos[0], req, h)
	if err != nil {
		stdout.endLine()
		stderr.endLine()
		return err
	}
	// What a daemon sent only in the final event.
	if !results {
		for _, r := range res.Results {
			printResult(stdout, r)
		}
	}
	if !failed && res.Error != nil {
		printExecutionError(stderr, *res.Error)
	}
	stdout.endLine()
	stderr.endLine()
	if res.StateLost {
		fmt.Fprintf(c.stderr, "agent2env %s: the interpreter was restarted: its variables and imports are gone\n", name)
	}
	if !res.Success {
		return &exitError{code: 1}
	}
	return nil
}

// lineWriter remembers whether what it wrote ended a line, so that what
// the CLI prints itself starts on a line of its own.
type lineWriter struct {
	w   io.Writer
	mid bool // the last byte written was not a newline
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.mid = p[len(p)-1] != '\n'
	}
	return l.w.Write(p)
}

// endLine ends a line the output left open.
func (l *lineWriter) endLine() {
	if l.mid {
		l.Write([]byte("\n"))
	}
}

// println writes s on a line of its own.
func (l *lineWriter) println(s string) {
	l.endLine()
	io.WriteString(l, s)
	l.endLine()
}

// printResult prints the text representation of a rich result, and a
// line saying the size of each image.
func printResult(w *lineWriter, r api.ExecutionResult) {
	var text string
	switch {
	case r.Text != "":
		text = r.Text
	case r.Markdown != "":
		text = r.Markdown
	case r.LaTeX != "":
		text = r.LaTeX
	case r.JSON != nil:
		if b, err := json.Marshal(r.JSON); err == nil {
			text = string(b)
		}
	}
	if text != "" {
		w.println(text)
	}
	images := false
	for _, img := range []struct {
		mime, data string
		base64     bool
	}{
		{"image/png", r.PNG, true},
		{"image/jpeg", r.JPEG, true},
		{"image/svg+xml", r.SVG, false},
	} {
		if img.data == "" {
			continue
		}
		images = true
		n := len(img.data)
		if img.base64 {
			n = decodedLen(img.data)
		}
		w.println(fmt.Sprintf("[%s %d bytes]", img.mime, n))
	}
	if text != "" || images {
		return
	}
	switch {
	case r.HTML != "":
		w.println(fmt.Sprintf("[text/html %d bytes]", len(r.HTML)))
	case r.JavaScript != "":
		w.println(fmt.Sprintf("[application/javascript %d bytes]", len(r.JavaScript)))
	}
}

// decodedLen returns the size of the data that base64 s encodes.
func decodedLen(s string) int {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return len(b)
	}
	return base64.StdEncoding.DecodedLen(len(s))
}

// printExecutionError prints why code failed: its traceback, or its name
// and message.
func printExecutionError(w *lineWriter, e api.ExecutionError) {
	msg := strings.TrimRight(e.Traceback, "\n")
	if msg == "" {
		msg = e.Name
		if e.Value != "" {
			msg += ": " + e.Value
		}
	}
	if msg != "" {
		w.println(msg)
	}
}

func (c *contextCmd) list(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	session := fs.String("session", "", "list the contexts of session `NAME`")
	sandbox := fs.String("sandbox", "", "list the contexts in sandbox `ID`")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	cxs, err := cl.Contexts().List(ctx, client.ListContextsOptions{SessionName: *session, SandboxID: *sandbox})
	if err != nil {
		return err
	}
	if *asJSON {
		l := api.List[api.Context]{Items: make([]api.Context, len(cxs))}
		for i, cx := range cxs {
			l.Items[i] = cx.Context
		}
		return printJSON(c.stdout, l)
	}
	tw := table(c.stdout, "CONTEXT ID", "LANGUAGE", "SANDBOX", "SESSION", "EXECUTIONS", "CREATED")
	for _, cx := range cxs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", cx.ContextID, cx.Language, cx.SandboxID, cx.SessionName,
			cx.ExecutionCount, age(cx.CreatedAt))
	}
	return tw.Flush()
}

func (c *contextCmd) rm(ctx context.Context, name string, args []string) error {
	return removeEach(ctx, c.env, name, "CONTEXT_ID", "context id", args,
		func(ctx context.Context, cl *client.Client, id string) error { return cl.Contexts().Delete(ctx, id) })
}
