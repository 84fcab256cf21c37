package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api/client"
)

// BridgeOptions configure the stdio bridge.
type BridgeOptions struct {
	// DefaultTimeout, when set, is the timeout (seconds) of calls of tools
	// with a timeout argument that give none: SANDBOX_TIMEOUT of seed 001
	// (client.TimeoutFromEnv).
	DefaultTimeout float64
	Log            *slog.Logger
}

// ServeStdio serves MCP on stdin and stdout as a bridge to the daemon c
// talks to (`agent2env mcp`), until ctx is done or stdin closes.
func ServeStdio(ctx context.Context, c *client.Client, opts BridgeOptions) error {
	return Bridge(ctx, c, &mcp.StdioTransport{}, opts)
}

// Bridge serves MCP on transport t as a thin proxy of the daemon's /mcp:
// it offers the daemon's tools and resource templates, forwards each call
// with its arguments and progress token, passes the daemon's progress
// notifications back, and cancels the daemon's call when its own is
// cancelled. The daemon holds all state, and keeps it across the
// bridge's restarts and its own.
func Bridge(ctx context.Context, c *client.Client, t mcp.Transport, opts BridgeOptions) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	b := &bridge{opts: opts, progress: map[any]*progressEntry{}}
	remote := mcp.NewClient(&mcp.Implementation{Name: "agent2env-mcp-bridge", Version: Version},
		&mcp.ClientOptions{ProgressNotificationHandler: b.forwardProgress})
	cs, err := remote.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.URL("/mcp"), HTTPClient: c.HTTPClient(),
		DisableStandaloneSSE: true}, nil)
	if err != nil {
		return fmt.Errorf("connect to the daemon's MCP endpoint %s: %w", c.URL("/mcp"), err)
	}
	defer cs.Close()
	b.remote = cs
	info := cs.InitializeResult()
	srv := mcp.NewServer(&mcp.Implementation{Name: info.ServerInfo.Name, Title: info.ServerInfo.Title, Version: info.ServerInfo.Version},
		&mcp.ServerOptions{Instructions: info.Instructions, Logger: opts.Log})
	srv.AddReceivingMiddleware(recoverPanics(opts.Log))
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
	return srv.Run(ctx, t)
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
