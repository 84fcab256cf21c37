package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
)

// ContextService holds the code-interpreter context endpoints: live
// interpreters (python, javascript or bash) in a sandbox whose variables
// and imports persist between executions. Get it with Client.Contexts.
//
//	cx, err := c.Contexts().Create(ctx, api.CreateContextRequest{Language: api.LanguagePython})
//	res, err := cx.Run(ctx, "x = 6 * 7\nx")
//	// res.Success, res.Result == "42"
//	err = cx.Delete(ctx)
type ContextService struct {
	c *Client
}

// Contexts returns the code-interpreter context endpoints.
func (c *Client) Contexts() *ContextService {
	return &ContextService{c: c}
}

// Context is a handle on a code-interpreter context: the context as the
// daemon last described it, and methods that act on it. It marshals to
// JSON as the api.Context it embeds. Its methods do not change it, so it
// is safe for concurrent use; the daemon runs one execution of a context
// at a time.
type Context struct {
	api.Context
	c *Client
}

// contextPath returns the escaped API path of context id plus suffix.
func contextPath(id, suffix string) (string, error) {
	if id == "" {
		return "", invalidf("context id is empty")
	}
	return "/contexts/" + url.PathEscape(id) + suffix, nil
}

// handle wraps a context the daemon returned.
func (s *ContextService) handle(cx api.Context) *Context {
	return &Context{Context: cx, c: s.c}
}

// Create creates a context. Unless req.SandboxID names a sandbox, the
// daemon puts it in the sandbox of a live context with the same
// req.SessionName, or in a new sandbox made from req.Template (default:
// the language's default template). It returns once the interpreter is
// ready.
func (s *ContextService) Create(ctx context.Context, req api.CreateContextRequest) (*Context, error) {
	var cx api.Context
	if err := s.c.doJSON(ctx, http.MethodPost, "/contexts", req, &cx); err != nil {
		return nil, wrapf(err, "create context")
	}
	return s.handle(cx), nil
}

// CreateIn creates a context in the existing sandbox sandboxID, which
// overrides req.SandboxID. A missing sandbox gives ErrNotFound.
func (s *ContextService) CreateIn(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*Context, error) {
	p, err := sandboxPath(sandboxID, "/contexts")
	if err != nil {
		return nil, wrapf(err, "create context")
	}
	req.SandboxID = ""
	var cx api.Context
	if err := s.c.doJSON(ctx, http.MethodPost, p, req, &cx); err != nil {
		return nil, wrapf(err, "create context in sandbox %s", sandboxID)
	}
	return s.handle(cx), nil
}

// Get returns a context. A missing one gives ErrNotFound, with code
// api.CodeContextNotFound.
func (s *ContextService) Get(ctx context.Context, id string) (*Context, error) {
	p, err := contextPath(id, "")
	if err != nil {
		return nil, wrapf(err, "get context")
	}
	var cx api.Context
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &cx); err != nil {
		return nil, wrapf(err, "get context %s", id)
	}
	return s.handle(cx), nil
}

// ListContextsOptions filter a context listing. The zero value lists
// every context, oldest first.
type ListContextsOptions struct {
	// SessionName keeps the contexts of this session.
	SessionName string
	// SandboxID keeps the contexts in this sandbox.
	SandboxID string
	// Limit and Cursor ask for one page (Limit 0: every context); the
	// next page's cursor is the page's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default) or
	// api.OrderAsc oldest first, api.OrderDesc newest first.
	Order api.Order
}

// query returns the options as the query string of GET /contexts, leaving
// out the zero ones.
func (o ListContextsOptions) query() url.Values {
	q := pageQuery(o.Limit, o.Cursor, o.Order)
	if o.SessionName != "" {
		q.Set("session_name", o.SessionName)
	}
	if o.SandboxID != "" {
		q.Set("sandbox_id", o.SandboxID)
	}
	return q
}

// ContextPage is a page of contexts.
type ContextPage struct {
	// Items are the page's contexts, in the list's order.
	Items []*Context
	// NextCursor, as ListContextsOptions.Cursor, asks for the page after
	// this one; "" on the last page.
	NextCursor string
}

// List returns the contexts matching opts, oldest first unless opts.Order
// says otherwise: one page when opts.Limit is set.
func (s *ContextService) List(ctx context.Context, opts ListContextsOptions) ([]*Context, error) {
	p, err := s.ListPage(ctx, opts)
	if err != nil {
		return nil, err
	}
	return p.Items, nil
}

// ListPage is List with the cursor of the next page.
func (s *ContextService) ListPage(ctx context.Context, opts ListContextsOptions) (*ContextPage, error) {
	var l api.ContextList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/contexts", opts.query(), nil, &l); err != nil {
		return nil, wrapf(err, "list contexts")
	}
	items := l.Items
	if len(items) == 0 {
		items = l.Contexts // a server that fills only the code-interpreter context API's "contexts"
	}
	out := &ContextPage{Items: make([]*Context, len(items)), NextCursor: l.NextCursor}
	for i, cx := range items {
		out.Items[i] = s.handle(cx)
	}
	return out, nil
}

// Delete stops a context's interpreter and removes the context. A sandbox
// the daemon created for it goes with its last context.
func (s *ContextService) Delete(ctx context.Context, id string) error {
	p, err := contextPath(id, "")
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodDelete, p, nil, nil)
	}
	if err != nil {
		return wrapf(err, "delete context %s", id)
	}
	return nil
}

// Execute runs code in context id and returns the result once it has
// finished. Code that fails (raises, does not parse, times out) is a
// result with Success false and Error set, not a Go error.
func (s *ContextService) Execute(ctx context.Context, id string, req api.ExecuteRequest) (*api.ExecuteResponse, error) {
	p, err := contextPath(id, "/execute")
	if err != nil {
		return nil, wrapf(err, "execute")
	}
	var res api.ExecuteResponse
	if err := s.c.doJSON(ctx, http.MethodPost, p, req, &res); err != nil {
		return nil, wrapf(err, "execute in context %s", id)
	}
	return &res, nil
}

// StreamHandler receives the events of a streamed execution as they
// arrive, on the goroutine that called ExecuteStream or RunStream, one at a
// time and in order. Nil fields are skipped.
type StreamHandler struct {
	// OnStdout and OnStderr get each chunk of output.
	OnStdout func(text string)
	OnStderr func(text string)
	// OnResult gets each rich output: displayed values and figures as they
	// are produced, then the value of the last expression.
	OnResult func(result api.ExecutionResult)
	// OnError gets why the code failed, at most once.
	OnError func(err api.ExecutionError)
}

// ExecuteStream runs code in context id, handing its output, results and
// error to h as they are produced, and returns the same response Execute
// would: Output holds the streamed chunks. Code that fails is a result
// with Success false and Error set, not a Go error; a stream that ends
// before its "complete" event is an error.
func (s *ContextService) ExecuteStream(ctx context.Context, id string, req api.ExecuteRequest, h StreamHandler) (*api.ExecuteResponse, error) {
	p, err := contextPath(id, "/execute/stream")
	if err != nil {
		return nil, wrapf(err, "execute")
	}
	res, err := s.executeStream(ctx, p, req, h)
	if err != nil {
		return nil, wrapf(err, "execute in context %s", id)
	}
	return res, nil
}

func (s *ContextService) executeStream(ctx context.Context, p string, req api.ExecuteRequest, h StreamHandler) (*api.ExecuteResponse, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.send(ctx, http.MethodPost, apiPrefix+p, nil, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var (
		stdout, stderr strings.Builder
		results        []api.ExecutionResult
		execErr        *api.ExecutionError
	)
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("execution stream ended without a complete event")
		}
		if err != nil {
			return nil, wrapf(err, "read execution stream")
		}
		switch ev.Name {
		case api.EventStdout, api.EventStderr:
			var chunk api.ExecutionOutputEvent
			if err := json.Unmarshal(ev.Data, &chunk); err != nil {
				return nil, wrapf(err, "decode %s event", ev.Name)
			}
			buf, fn := &stdout, h.OnStdout
			if ev.Name == api.EventStderr {
				buf, fn = &stderr, h.OnStderr
			}
			buf.WriteString(chunk.Text)
			if fn != nil {
				fn(chunk.Text)
			}
		case api.EventResult:
			var r api.ExecutionResult
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				return nil, wrapf(err, "decode result event")
			}
			results = append(results, r)
			if h.OnResult != nil {
				h.OnResult(r)
			}
		case api.EventError:
			e, err := executionErrorEvent(ev.Data)
			if err != nil {
				return nil, err
			}
			execErr = e
			if h.OnError != nil {
				h.OnError(*e)
			}
		case api.EventComplete:
			var res api.ExecuteResponse
			if err := json.Unmarshal(ev.Data, &res); err != nil {
				return nil, wrapf(err, "decode complete event")
			}
			// The output was streamed, not repeated; the rest should be
			// in the event, but a terse daemon gets the same answer.
			if res.Output.Stdout == "" {
				res.Output.Stdout = stdout.String()
			}
			if res.Output.Stderr == "" {
				res.Output.Stderr = stderr.String()
			}
			if len(res.Results) == 0 && len(results) > 0 {
				res.Results = results
			}
			if res.Error == nil {
				res.Error = execErr
			}
			return &res, nil
		default:
			// An event type of a newer daemon.
		}
	}
}

// executionErrorEvent decodes the data of an "error" event: an
// api.ExecutionError when the code failed, or an api.Error, told apart by
// its "code", when the request itself failed, which it returns as an
// *APIError.
func executionErrorEvent(data []byte) (*api.ExecutionError, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, wrapf(err, "decode error event")
	}
	if _, ok := fields["code"]; ok {
		err := streamError(data)
		return nil, err
	}
	var e api.ExecutionError
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, wrapf(err, "decode error event")
	}
	return &e, nil
}

// RunOption configures one execution of Context.Run or RunStream.
type RunOption func(*api.ExecuteRequest)

// WithRunTimeout bounds an execution: when d elapses the daemon interrupts
// it, the response says so (Error.Name api.ErrorNameTimeout) and the
// context stays usable. d is sent in seconds, to the millisecond; d <= 0
// leaves the daemon's default, 30 seconds. To bound the wait for the
// response rather than the execution, use ctx.
func WithRunTimeout(d time.Duration) RunOption {
	return func(req *api.ExecuteRequest) {
		if d <= 0 {
			req.Timeout = 0
			return
		}
		req.Timeout = max(d.Round(time.Millisecond), time.Millisecond).Seconds()
	}
}

// executeRequest builds the ExecuteRequest of code with opts.
func executeRequest(code string, opts []RunOption) api.ExecuteRequest {
	req := api.ExecuteRequest{Code: code}
	for _, o := range opts {
		o(&req)
	}
	return req
}

// Run runs code in the context and returns the result once it has
// finished. Code that fails (raises, does not parse, times out) is a
// result with Success false and Error set, not a Go error; a Go error
// means the execution could not be run or its result not read, such as
// ErrNotFound for a context that no longer exists.
func (cx *Context) Run(ctx context.Context, code string, opts ...RunOption) (*api.ExecuteResponse, error) {
	return cx.c.Contexts().Execute(ctx, cx.ContextID, executeRequest(code, opts))
}

// RunStream runs code in the context, handing its output, results and
// error to h as they are produced, and returns the same response Run
// would, with Output assembled from the streamed chunks.
func (cx *Context) RunStream(ctx context.Context, code string, h StreamHandler, opts ...RunOption) (*api.ExecuteResponse, error) {
	return cx.c.Contexts().ExecuteStream(ctx, cx.ContextID, executeRequest(code, opts), h)
}

// Delete removes the context and stops its interpreter.
func (cx *Context) Delete(ctx context.Context) error {
	return cx.c.Contexts().Delete(ctx, cx.ContextID)
}
