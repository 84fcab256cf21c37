package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api/client"
)

// BridgeOptions configure the stdio bridge.
type BridgeOptions struct {
	// DefaultTimeout, when set, is the timeout (seconds) of calls of tools
	// with a timeout argument that give none: SANDBOX_TIMEOUT of seed 001
	// (client.TimeoutFromEnv).
	DefaultTimeout float64
	// DrainTimeout bounds how long the bridge, once its input has ended
	// (the client closed stdin), goes on answering the requests it read
	// before: calls still unanswered then are cancelled, at the daemon
	// too, and the bridge returns. Zero is drainTimeout(DefaultTimeout).
	DrainTimeout time.Duration
	Log          *slog.Logger
}

// drainGrace is what DrainTimeout's default allows a call beyond its
// timeout: the sandbox's start, the interrupt's grace, the answer.
const drainGrace = 30 * time.Second

// drainTimeout is DrainTimeout's default: as long as a call that gives
// no timeout runs (callTimeout seconds, SANDBOX_TIMEOUT, when longer than
// the daemon's defaultTimeout), plus drainGrace, short of overflowing. A
// call that gives a longer timeout of its own may be cut short.
func drainTimeout(callTimeout float64) time.Duration {
	d := max(callTimeout, defaultTimeout) * float64(time.Second)
	if !(d < float64(math.MaxInt64-drainGrace)) {
		return math.MaxInt64
	}
	return time.Duration(d) + drainGrace
}

// ServeStdio serves MCP on stdin and stdout as a bridge to the daemon c
// talks to (`agent2env mcp`), until ctx is done or stdin closes and the
// requests read before are answered (see BridgeOptions.DrainTimeout).
func ServeStdio(ctx context.Context, c *client.Client, opts BridgeOptions) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return Bridge(ctx, c, lineTransport(os.Stdin, nopCloser{os.Stdout}, mcp.DefaultMaxLineLength, opts.Log), opts)
}

// nopCloser is a writer whose Close leaves it open (stdout, as the SDK's
// stdio transport leaves it).
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Bridge serves MCP on transport t as a thin proxy of the daemon's /mcp:
// it offers the daemon's tools and resource templates, forwards each call
// with its arguments and progress token, passes the daemon's progress
// notifications back, and cancels the daemon's call when its own is
// cancelled. The daemon holds all state, and keeps it across the
// bridge's restarts and its own. When t's input ends, Bridge returns once
// the requests read before are answered, or after opts.DrainTimeout.
func Bridge(ctx context.Context, c *client.Client, t mcp.Transport, opts BridgeOptions) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = drainTimeout(opts.DefaultTimeout)
	}
	b := &bridge{opts: opts, progress: map[any]*progressEntry{}}
	remote := mcp.NewClient(&mcp.Implementation{Name: "agent2env-mcp-bridge", Version: Version},
		&mcp.ClientOptions{ProgressNotificationHandler: b.forwardProgress})
	hc := c.HTTPClient()
	watch := &unauthorizedWatch{base: hc.Transport}
	hc.Transport = watch
	cs, err := remote.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.URL("/mcp"), HTTPClient: hc,
		DisableStandaloneSSE: true}, nil)
	if err != nil {
		if watch.seen.Load() {
			err = unauthorizedError{err}
		}
		return fmt.Errorf("connect to the daemon's MCP endpoint %s: %w", c.URL("/mcp"), err)
	}
	defer cs.Close()
	b.remote = cs
	info := cs.InitializeResult()
	srv := mcp.NewServer(&mcp.Implementation{Name: info.ServerInfo.Name, Title: info.ServerInfo.Title, Version: info.ServerInfo.Version},
		&mcp.ServerOptions{Instructions: info.Instructions, Logger: opts.Log})
	srv.AddReceivingMiddleware(recoverPanics(opts.Log), endWith(ctx))
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the daemon's tools: %w", err)
		}
		srv.AddTool(tool, b.callTool(tool))
	}
	for tmpl, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the daemon's resource templates: %w", err)
		}
		srv.AddResourceTemplate(tmpl, b.readResource)
	}
	return srv.Run(ctx, &drainTransport{t: t, bound: opts.DrainTimeout, log: opts.Log})
}

// endWith cancels the handlers in flight when ctx ends, with its cause.
// The SDK gives handlers contexts of their own, and at the end of Run's
// context waits for them: a call in flight held the bridge, and
// `agent2env mcp` on SIGTERM, until the daemon answered it.
func endWith(ctx context.Context) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(hctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			hctx, cancel := context.WithCancelCause(hctx)
			defer cancel(nil)
			defer context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })()
			return next(hctx, method, req)
		}
	}
}

// bridge forwards calls to the daemon.
type bridge struct {
	opts   BridgeOptions
	remote *mcp.ClientSession

	mu sync.Mutex
	// progress maps the progress token of each call in flight to the
	// session its notifications go back to.
	progress map[any]*progressEntry
}

// progressEntry is the session of one call's progress notifications.
type progressEntry struct{ session *mcp.ServerSession }

// progressLinger is how long a call's progress token is kept after it.
const progressLinger = 2 * time.Second

// callTool forwards calls of tool.
func (b *bridge) callTool(tool *mcp.Tool) mcp.ToolHandler {
	hasTimeout := false
	if s, ok := tool.InputSchema.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		_, hasTimeout = props["timeout"]
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if hasTimeout && b.opts.DefaultTimeout > 0 {
			args = withDefault(args, "timeout", b.opts.DefaultTimeout)
		}
		params := &mcp.CallToolParams{Name: req.Params.Name, Arguments: args, Meta: maps.Clone(req.Params.Meta)}
		if token := req.Params.GetProgressToken(); token != nil {
			key, entry := tokenKey(token), &progressEntry{session: req.Session}
			b.mu.Lock()
			b.progress[key] = entry
			b.mu.Unlock()
			// Notifications sent before the result may be handled just
			// after it: the entry stays a moment (unless a new call took
			// the token).
			defer time.AfterFunc(progressLinger, func() {
				b.mu.Lock()
				if b.progress[key] == entry {
					delete(b.progress, key)
				}
				b.mu.Unlock()
			})
		}
		return b.remote.CallTool(ctx, params)
	}
}

// withDefault sets the argument name to v unless the arguments have it.
// None, or null, are no arguments.
func withDefault(raw json.RawMessage, name string, v any) json.RawMessage {
	var m map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &m) != nil {
		return raw // the daemon says what is wrong with them
	}
	if _, ok := m[name]; ok {
		return raw
	}
	if m == nil {
		m = map[string]any{}
	}
	m[name] = v
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// tokenKey makes JSON numbers and strings usable as map keys alike.
func tokenKey(token any) any {
	if f, ok := token.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	if i, ok := token.(int); ok {
		return int64(i)
	}
	return token
}

// forwardProgress passes a progress notification of the daemon on to the
// session whose call it belongs to.
func (b *bridge) forwardProgress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	b.mu.Lock()
	entry := b.progress[tokenKey(req.Params.ProgressToken)]
	b.mu.Unlock()
	if entry == nil {
		return
	}
	if err := entry.session.NotifyProgress(ctx, req.Params); err != nil {
		b.opts.Log.Debug("forward progress", "err", err)
	}
}

// readResource forwards a resource read.
func (b *bridge) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return b.remote.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI})
}

// drainTransport is transport t whose connection, at the end of its
// input, answers what it has read before it ends (drainConn), within
// bound.
type drainTransport struct {
	t     mcp.Transport
	bound time.Duration
	log   *slog.Logger
}

// Connect implements mcp.Transport. ctx is the server session's: the
// wait for answers ends with it.
func (d *drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := d.t.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect the MCP transport: %w", err)
	}
	return &drainConn{Connection: conn, ctx: ctx, bound: d.bound, log: d.log,
		pending: map[jsonrpc.ID]bool{}, closed: make(chan struct{})}, nil
}

// drainConn holds back the end of its connection's input (io.EOF from
// Read) until every request read before has been answered (its response
// written), for bound at most, or until the session's context ends or the
// connection closes. The SDK ends a session when Read fails, and from
// then on writes no response: without the wait, a client that writes its
// requests and closes its side (a one-shot pipe, `printf ... | agent2env
// mcp`) got no answers. Nothing else changes: messages, notifications
// and cancellations pass as they are, responses and progress are written
// during the wait, and with nothing pending the end passes at once. When
// bound is over, Read returns io.EOF and the SDK cancels the calls still
// in flight (and so the daemon's).
//
// The SDK's stdio connection learns the session's protocol version
// through an unexported method, which the wrapper hides: it serves only
// to refuse JSON-RPC batches under protocol 2025-06-18 and later, which
// the bridge then answers, as under earlier versions.
type drainConn struct {
	mcp.Connection
	ctx   context.Context
	bound time.Duration
	log   *slog.Logger

	mu sync.Mutex
	// pending are the requests read and not answered.
	pending map[jsonrpc.ID]bool
	// drained, while Read waits, is closed when pending empties.
	drained chan struct{}

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

// Read implements mcp.Connection.
func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		if errors.Is(err, io.EOF) {
			c.drain()
		}
		return nil, err
	}
	// A subscriptions/listen is answered only when it is cancelled: it
	// awaits nothing.
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method != "subscriptions/listen" {
		c.mu.Lock()
		c.pending[req.ID] = true
		c.mu.Unlock()
	}
	return msg, nil
}

// Write implements mcp.Connection. A response's request is answered once
// it is written (or failed to be: then nothing more will be).
func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		delete(c.pending, resp.ID)
		if len(c.pending) == 0 && c.drained != nil {
			close(c.drained)
			c.drained = nil
		}
		c.mu.Unlock()
	}
	return err
}

// Close implements mcp.Connection: it ends a wait for answers.
func (c *drainConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// drain waits for the pending requests to be answered, within bound.
func (c *drainConn) drain() {
	c.mu.Lock()
	n := len(c.pending)
	if n == 0 {
		c.mu.Unlock()
		return
	}
	drained := make(chan struct{})
	c.drained = drained
	c.mu.Unlock()
	c.log.Debug("mcp input ended: answering the requests read", "requests", n, "timeout", c.bound)
	timer := time.NewTimer(c.bound)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		c.mu.Lock()
		n = len(c.pending)
		c.mu.Unlock()
		c.log.Warn("mcp input ended: requests unanswered after the drain timeout are cancelled", "requests", n, "timeout", c.bound)
	case <-c.ctx.Done():
	case <-c.closed:
	}
}

// unauthorizedWatch notes a 401 among the answers of base: the MCP SDK's
// error for it says "Unauthorized" only.
type unauthorizedWatch struct {
	base http.RoundTripper
	seen atomic.Bool
}

func (w *unauthorizedWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		w.seen.Store(true)
	}
	return resp, err
}

// unauthorizedError is a connection the daemon refused for its token: it
// is client.ErrUnauthenticated, for which the CLI says how to give one.
type unauthorizedError struct{ err error }

func (e unauthorizedError) Error() string        { return e.err.Error() }
func (e unauthorizedError) Unwrap() error        { return e.err }
func (e unauthorizedError) Is(target error) bool { return target == client.ErrUnauthenticated }
