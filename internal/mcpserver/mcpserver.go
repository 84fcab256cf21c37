// Package mcpserver is agent2env's MCP server, on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk). Its tools call the contexts
// (service.Contexts) and sessions services in process, the same ones the
// REST API calls, so no rule is written twice:
//
//   - the code-interpreter tools run_code, create_context, stop_context and
//     list_contexts, with their JSON result shapes and error codes
//     (INVALID_PARAMS, CONTEXT_NOT_FOUND, INVALID_LANGUAGE,
//     EXECUTION_FAILED) as tool errors;
//   - the session tools execute_code and execute_command (sessions made on
//     first use), the file tools, list_sessions, get_session_info,
//     stop_session and get_stats.
//
// Every tool has a typed output schema and returns its result as
// structured content and as JSON text; figures come back as image content.
// Long executions send their output as progress notifications while they
// run, and a cancellation interrupts the running code (its context stays).
// A session's files are resources: sandbox://{session}/files/{path}.
//
// Pause and snapshots are not tools. The tools address sessions, and a
// session pauses by itself when idle (--session-pause-after). A restored
// or forked sandbox is no session (its contexts come back under new ids,
// but no session names them), so execute_code and execute_command could
// not reach it, only the file tools by sandbox_id: snapshot and
// fork_session tools wait for the session service to adopt such a sandbox
// as a session of its own.
//
// A call on a sandbox's own channel (127.0.0.1:4000/mcp inside it) has the
// tenant run:<id> for a task run's sandbox, else sandbox:<id>, and the
// sandbox owns what the call makes (auth.WithOwner): the manager admits it
// against the sandbox's share and deletes it with the sandbox.
//
// HTTP (Handler) is stateless: what persists is keyed by the session_id
// and context_id arguments, never by the MCP session, since many clients
// open one per call. Stdio (ServeStdio) is the bridge behind `agent2env mcp`: it
// forwards every message, progress and cancellation included, to a
// daemon's /mcp, and answers what it has read before it ends with stdin.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
)

// Version is what the server says of itself at initialization.
const Version = "1.0.0"

// Seed 004's error codes, and the other codes tool errors carry.
const (
	CodeInvalidParams    = "INVALID_PARAMS"
	CodeContextNotFound  = "CONTEXT_NOT_FOUND"
	CodeInvalidLanguage  = "INVALID_LANGUAGE"
	CodeExecutionFailed  = "EXECUTION_FAILED"
	CodeSessionNotFound  = "SESSION_NOT_FOUND"
	CodeFileNotFound     = "FILE_NOT_FOUND"
	CodeSandboxNotFound  = "SANDBOX_NOT_FOUND"
	CodeLanguageNotFound = "LANGUAGE_NOT_FOUND"
	CodeResourceLimit    = "RESOURCE_LIMIT"
	CodeNoCapacity       = "INSUFFICIENT_CAPACITY"
	CodeSandboxNotReady  = "SANDBOX_NOT_READY"
)

// Config configures the server.
type Config struct {
	// ScopeByKey makes the API key of each HTTP request its tenant (see
	// auth.Tenant), as the REST API does when keys are on.
	ScopeByKey bool
	// MaxRequestBytes bounds an HTTP request (default 16 MiB: write_file
	// carries files in its arguments, beyond the SDK's 4 MiB default).
	MaxRequestBytes int64
	Log             *slog.Logger
}

// Server is the MCP server of one daemon.
type Server struct {
	cfg  Config
	ctxs *service.Contexts
	sess *session.Service
	srv  *mcp.Server
	// calls are the tools/call requests in flight over HTTP.
	calls inflight
}

// New returns the server of the contexts and sessions services.
func New(cfg Config, ctxs *service.Contexts, sess *session.Service) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	s := &Server{cfg: cfg, ctxs: ctxs, sess: sess}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "agent2env", Title: "agent2env code sandboxes", Version: Version},
		&mcp.ServerOptions{
			Instructions: "Run Python, JavaScript and bash code and commands in sandboxes. " +
				"execute_code and execute_command keep state per session_id (omit it for a new session; the response names it). " +
				"create_context/run_code/stop_context/list_contexts are the code-interpreter context tools.",
			Logger: cfg.Log,
		})
	s.addTools()
	s.addResources()
	s.srv.AddReceivingMiddleware(recoverPanics(cfg.Log))
	return s
}

// recoverPanics answers a request whose handler panicked with a JSON-RPC
// internal error, and logs the panic to log: the SDK runs handlers on
// goroutines of its own and recovers none, so a panic would end the
// process (the daemon, or the stdio bridge).
func recoverPanics(log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if v := recover(); v != nil {
					log.Error("mcp handler panic", "method", method, "panic", v, "stack", string(debug.Stack()))
					res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// MCP returns the SDK server, for transports of the caller's own.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Handler returns the streamable HTTP transport, stateless. A call ends
// when its client cancels it or goes away (see trackCalls).
func (s *Server) Handler() http.Handler {
	return s.trackCalls(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		Logger:                       s.cfg.Log,
		MaxRequestBodyBytes:          s.cfg.MaxRequestBytes,
		PropagateRequestCancellation: true,
		// The SDK's DNS-rebinding protection stays on: a request reaching a
		// loopback listener must name a loopback host.
	}))
}

// Register serves Handler at /mcp on mux (a route group of the daemon's
// API, behind its auth), for the methods of the streamable HTTP transport
// (api/openapi.yaml): POST carries the messages; GET and DELETE are
// answered 405, which stateless servers give and clients expect.
func (s *Server) Register(mux *http.ServeMux) {
	h := s.Handler()
	mux.Handle("POST /mcp", h)
	mux.Handle("GET /mcp", h)
	mux.Handle("DELETE /mcp", h)
}

// tenant returns ctx with the tenant of its call: a sandbox's own (see
// SandboxTenant), and the sandbox as the owner of what it makes, when the
// request came on a sandbox's channel; else the tenant of the request's
// API key, when the server scopes by key.
func (s *Server) tenant(ctx context.Context, extra *mcp.RequestExtra) context.Context {
	if t, ok := SandboxTenant(caller.From(ctx)); ok {
		return auth.WithOwner(auth.WithTenant(ctx, t), caller.From(ctx).Sandbox)
	}
	if !s.cfg.ScopeByKey || extra == nil || extra.Header == nil {
		return ctx
	}
	if key, ok := auth.Bearer(extra.Header.Get("Authorization")); ok {
		return auth.WithTenant(ctx, auth.Tenant(key))
	}
	return ctx
}

// SandboxTenant is the tenant of the calls c makes from a sandbox's own
// channel (package caller): its run's (auth.RunTenant) when the sandbox
// is a task run's, else the sandbox's (auth.SandboxTenant); false when c
// is no sandbox's. What such a caller makes (sessions, contexts) is out
// of reach of every other tenant, owned by the sandbox (counted against
// its limits, gone with it), and it reaches no sandbox by id but its own
// and its sessions' (checkTarget): a task's agent cannot reach other
// runs' sandboxes, nor the API's tenants its.
func SandboxTenant(c caller.Caller) (string, bool) {
	switch {
	case c.Sandbox == "":
		return "", false
	case c.Run != "":
		return auth.RunTenant(c.Run), true
	}
	return auth.SandboxTenant(c.Sandbox), true
}

// checkTarget refuses a file tool's sandbox_id, for a caller in a
// sandbox, unless it is its own sandbox or one of its tenant's sessions':
// SANDBOX_NOT_FOUND, as for a sandbox that does not exist.
func (s *Server) checkTarget(ctx context.Context, t FileTarget) error {
	c := caller.From(ctx)
	if t.SandboxID == "" || c.Sandbox == "" || t.SandboxID == c.Sandbox {
		return nil
	}
	list, err := s.sess.List(ctx)
	if err != nil {
		return err
	}
	for _, sess := range list {
		if sess.SandboxID == t.SandboxID {
			return nil
		}
	}
	return errdefs.WithCode(errdefs.NotFound("sandbox %s not found", t.SandboxID), api.CodeSandboxNotFound)
}

// call is what a tool handler gets of its request.
type call struct {
	s   *Server
	req *mcp.CallToolRequest
	// releases give back what the result holds of the output budget.
	releases []func()
}

// release has f called once the call's result is sent (or, on a
// transport that does not say when, built): the memory of an execution's
// output counts against the output budget until then. The SDK copies a
// result two or three times as it encodes it (the text, the structured
// content, the message), after the handler has returned: budgets let go
// at the handler's return left those copies outside any bound, as many
// as the calls in flight.
func (c *call) release(f func()) { c.releases = append(c.releases, f) }

// done hands the functions given to release to the request's held
// releases (trackCalls runs them once the response is written), or calls
// them when there are none.
func (c *call) done(ctx context.Context) {
	if h, ok := ctx.Value(heldKey{}).(*held); ok {
		h.add(c.releases)
		return
	}
	for _, f := range c.releases {
		f()
	}
}

// held is what a tools/call request's results hold of the output budget,
// given back once its response is written.
type held struct {
	mu sync.Mutex
	fs []func()
}

type heldKey struct{}

func (h *held) add(fs []func()) {
	h.mu.Lock()
	h.fs = append(h.fs, fs...)
	h.mu.Unlock()
}

// release calls what add was given.
func (h *held) release() {
	h.mu.Lock()
	fs := h.fs
	h.fs = nil
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// tool is a tool with typed arguments and result: the handler's result is
// the structured content (and its JSON the text), extra content follows.
type tool[In, Out any] struct {
	name, title, description string
	// defaults are the arguments' defaults, by name.
	defaults    map[string]any
	annotations *mcp.ToolAnnotations
	handle      func(ctx context.Context, c *call, in In) (Out, []mcp.Content, error)
}

// add registers t on s. Arguments are checked against the input schema
// by this package, not the SDK's wrapper, so that a bad argument is the
// tool error INVALID_PARAMS of seed 004.
func add[In, Out any](s *Server, t tool[In, Out]) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.name, err))
	}
	for name, v := range t.defaults {
		b, _ := json.Marshal(v)
		in.Properties[name].Default = b
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve input schema: %v", t.name, err))
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", t.name, err))
	}
	ann := t.annotations
	if ann == nil {
		ann = &mcp.ToolAnnotations{}
	}
	ann.Title = t.title
	s.srv.AddTool(&mcp.Tool{Name: t.name, Title: t.title, Description: t.description, InputSchema: in, OutputSchema: out, Annotations: ann},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx = s.tenant(ctx, req.Extra)
			ctx, cancel := withCancelSignal(ctx)
			defer cancel()
			args, err := arguments[In](req.Params.Arguments, resolved)
			if err != nil {
				return errorResult(err), nil
			}
			c := &call{s: s, req: req}
			defer c.done(ctx)
			res, extra, err := t.handle(ctx, c, args)
			if err != nil {
				var shown *shownError
				if errors.As(err, &shown) { // a failed execution, shown whole
					return result(shown.v, extra, true)
				}
				s.cfg.Log.Debug("mcp tool failed", "tool", t.name, "err", err)
				return errorResult(err), nil
			}
			return result(res, extra, false)
		})
}

// arguments checks raw arguments against the input schema (defaults
// applied) and decodes them.
func arguments[In any](raw json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	m := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return in, invalid("%v", jsonbody.Explain(jsonbody.Locate(err, raw), "arguments"))
		}
	}
	var v any = m
	if err := schema.ApplyDefaults(&v); err != nil {
		return in, invalid("arguments: %v", err)
	}
	if err := schema.Validate(v); err != nil {
		return in, invalid("invalid arguments: %v", err)
	}
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, &in); err != nil {
		return in, invalid("invalid arguments: %v", jsonbody.Explain(err, "arguments"))
	}
	return in, nil
}

// invalid is an INVALID_PARAMS error.
func invalid(format string, args ...any) error {
	return errdefs.WithCode(errdefs.Invalid(format, args...), CodeInvalidParams)
}

// result is a tool result: v as structured content and as indented JSON
// text, then extra content (figures).
func result(v any, extra []mcp.Content, isError bool) (*mcp.CallToolResult, error) {
	text, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode tool result: %w", err)
	}
	content := append([]mcp.Content{&mcp.TextContent{Text: string(text)}}, extra...)
	return &mcp.CallToolResult{Content: content, StructuredContent: v, IsError: isError}, nil
}

// shownError is a failed execution whose result is the tool error: the
// client sees the output and the error's name, value and traceback.
type shownError struct{ v any }

func (e *shownError) Error() string { return "execution failed" }

// ToolError is the JSON text of a tool error.
type ToolError struct {
	Error      string     `json:"error"`
	Code       string     `json:"code"`
	Suggestion string     `json:"suggestion,omitempty"`
	Usage      *api.Usage `json:"usage,omitempty"`
}

// suggestions are what to do about each code, unless the error says.
var suggestions = map[string]string{
	CodeInvalidParams:    "check the tool's input schema: required arguments, their types",
	CodeContextNotFound:  "create a context with create_context, or find yours with list_contexts",
	CodeInvalidLanguage:  "use python or javascript (or bash)",
	CodeSessionNotFound:  "execute_code, execute_command or write_file makes a session; list_sessions shows yours",
	CodeFileNotFound:     "list_files shows what there is",
	CodeSandboxNotFound:  "use a session_id instead: sessions make their sandboxes",
	CodeLanguageNotFound: "the sandbox's image has no interpreter for it: use the default code-interpreter image",
	CodeExecutionFailed:  "retry; if it fails again, see the daemon's log",
	CodeSandboxNotReady:  "the sandbox was paused or stopped through agent2env's API: resume or start it there (agent2env sandbox resume|start ID), then retry",
}

// errorResult is the tool error of err: seed 004's {"error", "code"},
// with a suggestion and, for resource limits, the usage.
func errorResult(err error) *mcp.CallToolResult {
	te := ToolError{Error: err.Error(), Code: toolCode(err)}
	if d := errdefs.Details(err); d != nil {
		te.Suggestion, _ = d["suggestion"].(string)
		if u, ok := d["usage"].(api.Usage); ok {
			te.Usage = &u
		}
	}
	if te.Suggestion == "" {
		te.Suggestion = suggestions[te.Code]
	}
	text, _ := json.MarshalIndent(te, "", "  ")
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
}

// toolCode is the code of a tool error.
func toolCode(err error) string {
	switch code := errdefs.Code(err); code {
	case CodeInvalidParams, api.CodeInvalidLanguage, api.CodeContextNotFound, api.CodeSessionNotFound, api.CodeFileNotFound,
		api.CodeSandboxNotFound, api.CodeSandboxNotReady, api.CodeLanguageMissing, api.CodeLimitExceeded, api.CodeInsufficientCapacity:
		return code
	}
	if errors.Is(err, errdefs.ErrInvalidArgument) {
		return CodeInvalidParams
	}
	return CodeExecutionFailed
}
