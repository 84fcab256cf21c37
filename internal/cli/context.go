package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newContextCmd(e env, cc *clientConfig) *cobra.Command {
	return group("context <command>", "create code-interpreter contexts, run code in them, list and remove them",
		`  CTX=$(agent2env context create --language python --session demo)
  agent2env context exec "$CTX" 'x = 6 * 7; print(x)'
  agent2env context exec "$CTX" < analysis.py`,
		newContextCreateCmd(e, cc), newContextExecCmd(e, cc), newContextListCmd(e, cc),
		removeCmd(e, cc, "CONTEXT_ID", "context id", "remove contexts",
			`  agent2env context rm "$CTX"
  agent2env context ls -q --session notebook-1 | xargs -r agent2env context rm`, contextIDs,
			func(ctx context.Context, cl *client.Client, id string) error { return cl.Contexts().Delete(ctx, id) }),
	)
}

// contextView shows contexts: the API's value v, a table of cxs.
func contextView(v any, cxs []api.Context) view {
	t := newTable("CONTEXT ID", "LANGUAGE", "SANDBOX", "SESSION", "EXECUTIONS", "CREATED").withWide("STATUS", "WORKDIR", "LAST USED")
	ids := make([]string, len(cxs))
	for i, cx := range cxs {
		ids[i] = cx.ContextID
		t.add(cx.ContextID, cx.Language, cx.SandboxID, cx.SessionName, strconv.Itoa(cx.ExecutionCount), age(cx.CreatedAt),
			orDash(cx.Status), orDash(cx.WorkingDir), age(cx.LastUsedAt))
	}
	return view{value: v, ids: ids, table: t}
}

func newContextCreateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		req     api.CreateContextRequest
		sandbox string
		env     = envFlag{}
		out     output
	)
	c := &cobra.Command{
		Use:   "create [flags]",
		Short: "create a code-interpreter context (python, javascript or bash) and print its id",
		Example: `  agent2env context create --language javascript
  agent2env context create --session notebook-1 --workdir /tmp
  agent2env context create --sandbox "$ID" --language bash -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if sandbox != "" && req.Template != "" {
				return usageErrorf(c, "give --sandbox or --template, not both")
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			req.Env = env
			var cx *client.Context
			if sandbox != "" {
				cx, err = cl.Contexts().CreateIn(c.Context(), sandbox, req)
			} else {
				stop := showBuilds(c.Context(), e, cl) // a new sandbox may wait for its image
				cx, err = cl.Contexts().Create(c.Context(), req)
				stop()
			}
			if err != nil {
				return err
			}
			v := contextView(cx.Context, []api.Context{cx.Context})
			v.text = idText(cx.ContextID)
			return out.print(e.stdout, v)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Language, "language", "", "interpreter: python, javascript or bash (default: the daemon's, python)")
	f.StringVar(&req.SessionName, "session", "", "session `NAME`: contexts of one live session share a sandbox and its files")
	f.StringVar(&req.WorkingDir, "workdir", "", "working `DIR` of the interpreter (default: the daemon's, /workspace)")
	f.StringVar(&sandbox, "sandbox", "", "put the context in the existing sandbox `ID`")
	f.StringVar(&req.Template, "template", "", "template of the sandbox made for the context (default: the language's)")
	f.Var(env, "env", "environment variable `KEY=VALUE` of the interpreter (repeatable)")
	c.RegisterFlagCompletionFunc("sandbox", cc.complete(e, sandboxIDs, true))
	c.RegisterFlagCompletionFunc("template", cc.complete(e, templateNames, true))
	out.register(c, "the context's id", tableFormats)
	return c
}

func newContextExecCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		timeout time.Duration
		vars    = envFlag{}
		out     output
	)
	c := &cobra.Command{
		Use:   "exec CONTEXT_ID [CODE|-] [flags]",
		Short: "run code in a context, from CODE or standard input, streaming its output",
		Long: `exec runs code in a context and streams its output: stdout and stderr as the code writes
them (escape sequences included: it is your code's), then the value of its last expression
and a line for each image it displayed. It exits 1 when the code failed, 124 when it timed out.
With -o json or -o yaml it prints the whole response once the code has finished instead.`,
		Example: `  agent2env context exec "$CTX" 'import sys; print(sys.version)'
  agent2env context exec "$CTX" --timeout 5m < train.py
  agent2env context exec "$CTX" -o json -- '-1 + 2' | jq .result`,
		ValidArgsFunction: cc.complete(e, contextIDs, false),
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 || len(args) > 2 {
				return usageErrorf(c, "need a context id and at most one CODE argument (none or - reads the code from standard input)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			timeout, err := runTimeout(c, e, timeout)
			if err != nil {
				return err
			}
			return execContext(c, e, cc, args, api.ExecuteRequest{Env: vars}, timeout, &out)
		},
	}
	timeoutVar(c.Flags(), &timeout, "`SECONDS` (or a duration such as 2m) before the execution is interrupted; the context stays usable (default: $"+envRunTimeout+", else the daemon's, 30)")
	c.Flags().VarP(vars, "env", "e", "environment variable `KEY=VALUE` of this run only (repeatable)")
	out.register(c, "the output as it comes", valueFormats)
	return c
}

// execContext runs the code of args in context args[0] with req's other
// fields.
func execContext(c *cobra.Command, e env, cc *clientConfig, args []string, req api.ExecuteRequest, timeout time.Duration, out *output) error {
	var code string
	if len(args) == 2 && args[1] != "-" {
		code = args[1]
	} else {
		b, err := io.ReadAll(e.in())
		if err != nil {
			return fmt.Errorf("read code from standard input: %w", err)
		}
		code = string(b)
	}
	cl, err := cc.client(e)
	if err != nil {
		return err
	}
	req.Code = code
	client.WithRunTimeout(timeout)(&req)
	if out.structured() {
		res, err := cl.Contexts().Execute(c.Context(), args[0], req)
		if err != nil {
			return err
		}
		if err := out.print(e.stdout, view{value: res}); err != nil {
			return err
		}
		if !res.Success {
			return codeExit(res.Error)
		}
		return nil
	}
	// Your code's output, as it came.
	stdout, stderr := &lineWriter{w: raw(e.stdout)}, &lineWriter{w: raw(e.stderr)}
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
	res, err := cl.Contexts().ExecuteStream(c.Context(), args[0], req, h)
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
		fmt.Fprintf(e.stderr, "%s: the interpreter was restarted: its variables and imports are gone\n", c.CommandPath())
	}
	if !res.Success {
		return codeExit(res.Error)
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
	// HTML and JavaScript are for notebooks, which a terminal is not: they
	// are announced only when nothing else shows the result.
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

// decodedLen returns the size of the data that base64 s encodes, or
// about that size when s is not valid base64: the line reports a size,
// it does not check the image.
func decodedLen(s string) int {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return len(b)
	}
	return base64.StdEncoding.DecodedLen(len(s))
}

// printExecutionError prints why code failed: its traceback, or its name
// and message. A system error (a timeout, say) has its name and message
// printed after the traceback too: its traceback only shows where the code
// was stopped (a KeyboardInterrupt), not why.
func printExecutionError(w *lineWriter, e api.ExecutionError) {
	if tb := strings.TrimRight(e.Traceback, "\n"); tb != "" {
		w.println(tb)
		if e.Kind != api.ErrorKindSystem {
			return
		}
	}
	msg := e.Name
	if e.Value != "" {
		msg += ": " + e.Value
	}
	if msg != "" {
		w.println(msg)
	}
}

// codeExit is the exit code of code that failed with err: 124 when it
// timed out (as timeout(1) and sandbox exec exit), else 1.
func codeExit(err *api.ExecutionError) error {
	if err != nil && err.Name == api.ErrorNameTimeout {
		return &exitError{code: timeoutExit}
	}
	return &exitError{code: 1}
}

func newContextListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		opts client.ListContextsOptions
		out  output
		page pageFlags
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list contexts, oldest first (or newest first)",
		Example: `  agent2env context ls --session notebook-1
  agent2env context ls --newest --limit 20
  agent2env context ls --limit 100 --cursor "$NEXT" -o json
  agent2env context ls -q --sandbox "$ID" | xargs -r agent2env context rm`,
		Args: noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			opts.Limit, opts.Cursor, opts.Order = int(page.limit), page.cursor, page.order()
			p, err := cl.Contexts().ListPage(ctx, opts)
			if err != nil {
				return view{}, err
			}
			l := contextPage{Items: make([]api.Context, len(p.Items)), NextCursor: p.NextCursor}
			for i, cx := range p.Items {
				l.Items[i] = cx.Context
			}
			return contextView(l, l.Items), nil
		}),
	}
	c.Flags().StringVar(&opts.SessionName, "session", "", "list the contexts of session `NAME`")
	c.Flags().StringVar(&opts.SandboxID, "sandbox", "", "list the contexts in sandbox `ID`")
	page.register(c, "contexts", "next_cursor", false)
	out.register(c, "table", tableFormats)
	return c
}

// contextPage is what context ls prints as JSON or YAML: the page's
// contexts, and the next page's cursor when there is one.
type contextPage struct {
	Items      []api.Context `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
}
