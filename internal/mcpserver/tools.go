package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
)

// defaultTimeout is seed 004's execution timeout, in seconds.
const defaultTimeout = 30

// MaxFileBytes bounds the file write_file writes and read_file reads.
const MaxFileBytes = 8 << 20

// MaxResultText bounds what an execution's texts (capTexts), read_file's
// content or the entries of list_files, list_contexts and list_sessions
// take of the result's message: a file that takes more is read in parts,
// a list given in parts (fit).
const MaxResultText = 896 << 10

// messageSize is what v takes of a tool result's message: its JSON
// encoding, and that of its indented JSON text (result).
func messageSize(v any) int {
	b, _ := json.Marshal(v)
	text, _ := json.MarshalIndent(v, "", "  ")
	t, _ := json.Marshal(string(text))
	return len(b) + len(t)
}

// messageCost is what rune r takes of a result's message: its JSON
// encoding (as encoding/json writes it) and that encoding's own.
func messageCost(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 2 + 4 // \" then \\\"
	case r == '\n' || r == '\r' || r == '\t':
		return 2 + 3 // \n then \\n
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
		return 6 + 7 // \u00XX, \ufffd, then \\u00XX
	default:
		return 2 * utf8.RuneLen(r)
	}
}

// fitsMessage returns the length of the longest start of text that takes
// at most max bytes of a result's message (messageCost), ending at a
// character: len(text) when all of it fits.
func fitsMessage(text string, max int) int {
	if len(text) <= max/13 { // no character costs more than 13
		return len(text)
	}
	n := 0
	for i, r := range text {
		if n += messageCost(r); n > max {
			return i
		}
	}
	return len(text)
}

// messageLen is what text takes of a result's message (messageCost).
func messageLen(text string) int {
	n := 0
	for _, r := range text {
		n += messageCost(r)
	}
	return n
}

// markerRoom is what capTexts keeps of a text's share for its marker.
const markerRoom = 512

// capTexts cuts an execution's texts (its outputs, its value, its error's
// value and traceback) so that together they take at most MaxResultText
// of the result's message, and says whether it cut one. A result reaches
// the client as one message, holding its text twice (as structured
// content, and as the JSON text encoded again), and the stock Python
// client's HTTP transport refuses a message of more than 1 MiB, failing
// the call with nothing of it. Texts that fit an equal share are kept
// whole; the others share the rest equally, each cut at a character with
// a marker saying what was dropped. A client that asks for progress has
// the outputs whole as they came.
func capTexts(texts ...*string) bool {
	costs := make([]int, len(texts))
	total := 0
	for i, t := range texts {
		costs[i] = messageLen(*t)
		total += costs[i]
	}
	if total <= MaxResultText {
		return false
	}
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return costs[order[a]] < costs[order[b]] })
	left := MaxResultText
	for k, i := range order {
		share := left / (len(order) - k)
		if costs[i] <= share {
			left -= costs[i]
			continue
		}
		for _, j := range order[k:] {
			t := *texts[j]
			keep := fitsMessage(t, max(share-markerRoom, 0))
			*texts[j] = t[:keep] + fmt.Sprintf("\n[truncated: %d bytes past the MCP server's limit of a tool result were dropped; "+
				"a call with a progress token receives the output whole as progress]\n", len(t)-keep)
		}
		break
	}
	return true
}

// Seed 004's arguments and results.

// RunCodeArgs are run_code's arguments.
type RunCodeArgs struct {
	Code      string `json:"code" jsonschema:"the code to run"`
	ContextID string `json:"context_id" jsonschema:"the context (from create_context) to run it in"`
}

// RunCodeResult is run_code's result (seed 004).
type RunCodeResult struct {
	Stdout        string  `json:"stdout"`
	Stderr        string  `json:"stderr"`
	Success       bool    `json:"success"`
	ExecutionTime float64 `json:"execution_time" jsonschema:"seconds"`
	Truncated     bool    `json:"truncated,omitempty" jsonschema:"output was dropped: past the daemon's limit, or past the MCP server's of a tool result"`
}

// CreateContextArgs are create_context's arguments.
type CreateContextArgs struct {
	Name        string `json:"name" jsonschema:"a name for the context"`
	Language    string `json:"language,omitempty" jsonschema:"python (default) or javascript"`
	Description string `json:"description,omitempty" jsonschema:"what the context is for"`
}

// ContextInfo is a context as seed 004 describes it.
type ContextInfo struct {
	ContextID   string    `json:"context_id"`
	Name        string    `json:"name"`
	Language    string    `json:"language"`
	Description string    `json:"description"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
	LastUsed    time.Time `json:"last_used"`
}

// CreateContextResult is create_context's result (seed 004).
type CreateContextResult struct {
	ContextID   string    `json:"context_id"`
	Name        string    `json:"name"`
	Language    string    `json:"language"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	Status      string    `json:"status"`
	Message     string    `json:"message"`
}

// ContextArgs name a context.
type ContextArgs struct {
	ContextID string `json:"context_id" jsonschema:"the context's id"`
}

// StopContextResult is stop_context's result (seed 004).
type StopContextResult struct {
	ContextID string `json:"context_id"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

// NoArgs are the arguments of tools that take none.
type NoArgs struct{}

// ListArgs are the arguments of list_contexts and list_sessions, which
// seed 004's list_contexts{} calls without.
type ListArgs struct {
	Offset int `json:"offset,omitempty" jsonschema:"the entry to start at (default 0): a list with more entries than one result takes is given in parts"`
}

// ListContextsResult is list_contexts's result (seed 004's contexts and
// total; offset and truncated when it is a part).
type ListContextsResult struct {
	Contexts []ContextInfo `json:"contexts"`
	Total    int           `json:"total"`
	ListPart
}

// ListPart says which part of a list's entries a result has.
type ListPart struct {
	Offset    int  `json:"offset,omitempty"`
	Truncated bool `json:"truncated,omitempty" jsonschema:"more entries follow: list again from offset plus the entries returned"`
}

// Seed 000's session tools.

// ExecuteCodeArgs are execute_code's arguments.
type ExecuteCodeArgs struct {
	Code      string  `json:"code" jsonschema:"the code to run"`
	Language  string  `json:"language,omitempty" jsonschema:"python (default), javascript or bash"`
	SessionID string  `json:"session_id,omitempty" jsonschema:"the session to run in: omit it for a new one, reuse the id the result gives to keep state; an unknown id makes a session under that id"`
	Flavor    string  `json:"flavor,omitempty" jsonschema:"the size of a new session's sandbox: small (1 CPU, 1 GiB; default), medium (2, 2 GiB) or large (4, 4 GiB)"`
	Timeout   float64 `json:"timeout,omitempty" jsonschema:"seconds (default 30); the code is interrupted then and the session stays usable"`
}

// ExecuteCodeResult is execute_code's result.
type ExecuteCodeResult struct {
	SessionID     string              `json:"session_id"`
	Created       bool                `json:"created" jsonschema:"the call made the session"`
	ExpiresAt     time.Time           `json:"expires_at" jsonschema:"the session's idle deadline"`
	Language      string              `json:"language"`
	Stdout        string              `json:"stdout"`
	Stderr        string              `json:"stderr"`
	Success       bool                `json:"success"`
	ExecutionTime float64             `json:"execution_time" jsonschema:"seconds"`
	Result        string              `json:"result,omitempty" jsonschema:"the value of the last expression"`
	Error         *api.ExecutionError `json:"error,omitempty" jsonschema:"why it failed: name, value, traceback and kind (syntax, runtime or system)"`
	StateLost     bool                `json:"state_lost,omitempty" jsonschema:"the interpreter was restarted: variables are gone"`
	Truncated     bool                `json:"truncated,omitempty"`
}

// ExecuteCommandArgs are execute_command's arguments.
type ExecuteCommandArgs struct {
	Command   string  `json:"command" jsonschema:"a shell command, run by bash -c"`
	SessionID string  `json:"session_id,omitempty" jsonschema:"the session to run in: omit it for a new one"`
	Flavor    string  `json:"flavor,omitempty" jsonschema:"the size of a new session's sandbox: small (default), medium or large"`
	Timeout   float64 `json:"timeout,omitempty" jsonschema:"seconds (default 30); the command is killed then"`
	Cwd       string  `json:"cwd,omitempty" jsonschema:"the working directory (default /workspace)"`
}

// FileTarget names where a file tool works.
type FileTarget struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session (write_file makes it when it does not exist; read_file and list_files need one that exists); or give sandbox_id"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"a sandbox, instead of a session"`
}

// WriteFileArgs are write_file's arguments.
type WriteFileArgs struct {
	Path     string `json:"path" jsonschema:"the file's path; relative paths are in /workspace"`
	Content  string `json:"content" jsonschema:"the file's content (at most 8 MiB)"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64"`
	FileTarget
}

// ReadFileArgs are read_file's arguments.
type ReadFileArgs struct {
	Path     string `json:"path" jsonschema:"the file's path; relative paths are in /workspace"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text or base64 (default: text when what is read is UTF-8)"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"the byte of the file to start at (default 0)"`
	Length   int64  `json:"length,omitempty" jsonschema:"at most this many bytes (default: to the end of the file)"`
	FileTarget
}

// ListFilesArgs are list_files's arguments.
type ListFilesArgs struct {
	Path   string `json:"path,omitempty" jsonschema:"the directory (default /workspace)"`
	Offset int    `json:"offset,omitempty" jsonschema:"the entry to start at, by name (default 0): a directory with more entries than one result takes is listed in parts"`
	FileTarget
}

// FileResult is write_file's and read_file's result.
type FileResult struct {
	Path string `json:"path"`
	Size int64  `json:"size" jsonschema:"the bytes written, or read"`
	// Offset and FileSize say which part of the file a read of a part
	// (offset or length given) read.
	Offset    int64  `json:"offset,omitempty"`
	FileSize  int64  `json:"file_size,omitempty" jsonschema:"the whole file's size, when a part of it was read"`
	Content   string `json:"content,omitempty"`
	Encoding  string `json:"encoding,omitempty"`
	SandboxID string `json:"sandbox_id,omitempty"`
	SessionRef
}

// ListFilesResult is list_files's result.
type ListFilesResult struct {
	Path  string         `json:"path"`
	Files []api.FileInfo `json:"files" jsonschema:"the entries, by name"`
	// Total and the part say which part of the directory's entries Files
	// are.
	Total int `json:"total" jsonschema:"the directory's entries"`
	ListPart
	SessionRef
}

// SessionRef is the session a file tool worked in, with its idle
// deadline (none for a sandbox).
type SessionRef struct {
	SessionID string     `json:"session_id,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// SessionArgs name a session.
type SessionArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session's id"`
}

// ListSessionsResult is list_sessions's result.
type ListSessionsResult struct {
	Sessions []api.Session `json:"sessions"`
	Total    int           `json:"total"`
	ListPart
}

// StopSessionResult is stop_session's result.
type StopSessionResult struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

func ptr[T any](v T) *T { return &v }

func (s *Server) addTools() {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	closed := &mcp.ToolAnnotations{OpenWorldHint: ptr(false)}
	add(s, tool[RunCodeArgs, RunCodeResult]{
		name: "run_code", title: "Run code in a context",
		description: "Runs Python or JavaScript code in a context made by create_context; variables, imports and functions persist between runs. " +
			"Returns stdout, stderr, success and execution_time (seconds); figures come back as images.",
		annotations: closed, handle: s.runCode,
	})
	add(s, tool[CreateContextArgs, CreateContextResult]{
		name: "create_context", title: "Create a code context",
		description: "Creates an execution context (a live interpreter) for python (the default) or javascript, and returns its context_id.",
		defaults:    map[string]any{"language": api.LanguagePython, "description": ""},
		annotations: closed, handle: s.createContext,
	})
	add(s, tool[ContextArgs, StopContextResult]{
		name: "stop_context", title: "Stop a context",
		description: "Stops a context and frees what it used.",
		annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
		handle:      s.stopContext,
	})
	add(s, tool[ListArgs, ListContextsResult]{
		name: "list_contexts", title: "List contexts",
		description: "Lists the active contexts, newest first. More contexts than one result takes (thousands) are listed in parts: " +
			"the result says truncated, and the next part starts at offset.",
		annotations: readOnly, handle: s.listContexts,
	})
	add(s, tool[ExecuteCodeArgs, ExecuteCodeResult]{
		name: "execute_code", title: "Execute code in a session",
		description: "Runs Python, JavaScript or bash code in a session's sandbox, making the session on first use: omit session_id for a new one, " +
			"and pass the session_id of the result to keep variables and files. Output streams as progress; figures come back as images; " +
			"a failed execution is a tool error with the error's name, value and traceback.",
		defaults:    map[string]any{"language": api.LanguagePython},
		annotations: closed, handle: s.executeCode,
	})
	add(s, tool[ExecuteCommandArgs, api.SessionCommandResponse]{
		name: "execute_command", title: "Execute a shell command in a session",
		description: "Runs a shell command (bash -c) in a session's sandbox, making the session on first use; returns exit code, stdout and stderr.",
		annotations: closed, handle: s.executeCommand,
	})
	add(s, tool[WriteFileArgs, FileResult]{
		name: "write_file", title: "Write a file",
		description: "Writes a file (at most 8 MiB; base64 for binary) in a session's sandbox (made on first use) or a sandbox, making its directories.",
		defaults:    map[string]any{"encoding": "text"},
		annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: ptr(false)}, handle: s.writeFile,
	})
	add(s, tool[ReadFileArgs, FileResult]{
		name: "read_file", title: "Read a file",
		description: "Reads a file (at most 8 MiB) of a session's sandbox or a sandbox: as text when it is UTF-8, else base64. " +
			"A file larger than one result takes (about 440 KiB of plain text, 330 KiB of binary) is read in parts, with offset and length. " +
			"An unknown session is SESSION_NOT_FOUND: a read makes none.",
		annotations: readOnly, handle: s.readFile,
	})
	add(s, tool[ListFilesArgs, ListFilesResult]{
		name: "list_files", title: "List files",
		description: "Lists a directory of a session's sandbox or a sandbox, by name. A directory with more entries than one result takes " +
			"(thousands) is listed in parts: the result says truncated, and the next part starts at offset. " +
			"An unknown session is SESSION_NOT_FOUND: a list makes none.",
		defaults:    map[string]any{"path": "/workspace"},
		annotations: readOnly, handle: s.listFiles,
	})
	add(s, tool[ListArgs, ListSessionsResult]{
		name: "list_sessions", title: "List sessions",
		description: "Lists your sessions, oldest first: flavor, languages, idle deadline, executions. More sessions than one result takes " +
			"(thousands) are listed in parts: the result says truncated, and the next part starts at offset.",
		annotations: readOnly, handle: s.listSessions,
	})
	add(s, tool[SessionArgs, api.Session]{
		name: "get_session_info", title: "Get a session",
		description: "Describes a session: flavor, cpu, memory, sandbox, languages, created, last used, idle deadline, executions and their time.",
		annotations: readOnly, handle: s.getSession,
	})
	add(s, tool[SessionArgs, StopSessionResult]{
		name: "stop_session", title: "Stop a session", description: "Ends a session and removes its sandbox; what runs in it ends.",
		annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}, handle: s.stopSession,
	})
	add(s, tool[NoArgs, api.Stats]{
		name: "get_stats", title: "Get statistics",
		description: "Sessions, sandboxes by status, cpu and memory committed and used, executions (count, errors, p50 and p95 seconds).",
		annotations: readOnly, handle: s.getStats,
	})
}

// languageNames are the languages as messages name them.
var languageNames = map[string]string{api.LanguagePython: "Python", api.LanguageJavaScript: "JavaScript", api.LanguageBash: "Bash"}

func (s *Server) createContext(ctx context.Context, c *call, in CreateContextArgs) (CreateContextResult, []mcp.Content, error) {
	if strings.TrimSpace(in.Name) == "" {
		return CreateContextResult{}, nil, invalid("name is required")
	}
	lang, err := service.Language(in.Language)
	if err != nil {
		return CreateContextResult{}, nil, err
	}
	ctxt, err := s.ctxs.Create(ctx, "", api.CreateContextRequest{Language: lang, Name: in.Name, Description: in.Description})
	if err != nil {
		return CreateContextResult{}, nil, err
	}
	s.cfg.Log.Info("created context", "context", ctxt.ContextID, "language", lang, "name", in.Name)
	return CreateContextResult{ContextID: ctxt.ContextID, Name: ctxt.Name, Language: lang, Description: ctxt.Description,
		CreatedAt: ctxt.CreatedAt, Status: api.ContextStatusActive,
		Message: languageNames[lang] + " context created successfully"}, nil, nil
}

func (s *Server) runCode(ctx context.Context, c *call, in RunCodeArgs) (RunCodeResult, []mcp.Content, error) {
	if in.ContextID == "" {
		return RunCodeResult{}, nil, invalid("context_id is required")
	}
	resp, err := s.ctxs.ExecuteTo(ctx, in.ContextID, api.ExecuteRequest{Code: in.Code, Timeout: defaultTimeout}, c.codeSink(ctx))
	if err != nil {
		return RunCodeResult{}, nil, err
	}
	c.release(resp.Release)
	s.cfg.Log.Info("ran code in context", "context", in.ContextID, "success", resp.Success)
	out := RunCodeResult{Stdout: resp.Output.Stdout, Stderr: service.StderrWithError(resp.Output.Stderr, resp.Error), Success: resp.Success,
		ExecutionTime: resp.ExecutionTime}
	out.Truncated = capTexts(&out.Stdout, &out.Stderr) || resp.Truncated
	return out, images(resp.Results), nil
}

// images returns the figures of an execution as image content.
func images(results []api.ExecutionResult) []mcp.Content {
	var out []mcp.Content
	for _, r := range results {
		for _, img := range []struct{ data, mime string }{{r.PNG, "image/png"}, {r.JPEG, "image/jpeg"}} {
			if img.data == "" {
				continue
			}
			if b, err := base64.StdEncoding.DecodeString(img.data); err == nil {
				out = append(out, &mcp.ImageContent{Data: b, MIMEType: img.mime})
			}
		}
	}
	return out
}

func (s *Server) stopContext(ctx context.Context, c *call, in ContextArgs) (StopContextResult, []mcp.Content, error) {
	if in.ContextID == "" {
		return StopContextResult{}, nil, invalid("context_id is required")
	}
	if _, err := s.ctxs.Delete(ctx, "", in.ContextID); err != nil {
		return StopContextResult{}, nil, err
	}
	s.cfg.Log.Info("stopped context", "context", in.ContextID)
	return StopContextResult{ContextID: in.ContextID, Status: "stopped", Message: "Context stopped successfully"}, nil, nil
}

func (s *Server) listContexts(ctx context.Context, c *call, in ListArgs) (ListContextsResult, []mcp.Content, error) {
	list, err := s.ctxs.List(ctx, "", "")
	if err != nil {
		return ListContextsResult{}, nil, err
	}
	cs := list.Items
	all := make([]ContextInfo, 0, len(cs))
	for _, c := range cs {
		all = append(all, ContextInfo{ContextID: c.ContextID, Name: c.Name, Language: c.Language,
			Description: c.Description, Status: c.Status, CreatedAt: c.CreatedAt, LastUsed: c.LastUsedAt})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	out := ListContextsResult{Total: len(all)}
	part, err := fit(&out, &out.Contexts, all, in.Offset, "contexts")
	out.ListPart = part
	return out, nil, err
}

// checkOffset refuses a negative offset of a list.
func checkOffset(offset int) error {
	if offset < 0 {
		return invalid("offset must not be negative")
	}
	return nil
}

// fit sets *items, the entries of result out, to all from offset on, cut
// to the most that keep out's message within MaxResultText, and returns
// the part that is. An offset past the entries (of what) is
// INVALID_PARAMS.
func fit[T any](out any, items *[]T, all []T, offset int, what string) (ListPart, error) {
	if err := checkOffset(offset); err != nil {
		return ListPart{}, err
	}
	if offset > len(all) {
		return ListPart{}, invalid("offset %d is past the %d entries of %s", offset, len(all), what)
	}
	rest := all[offset:]
	if rest == nil {
		rest = []T{} // an empty list, not null
	}
	*items = rest
	part := ListPart{Offset: offset}
	if messageSize(out) > MaxResultText {
		// The most entries that fit: the size grows with their number.
		n := sort.Search(len(rest)+1, func(n int) bool {
			*items = rest[:n]
			return messageSize(out) > MaxResultText
		}) - 1
		*items, part.Truncated = rest[:max(n, 0)], true
	}
	return part, nil
}

func (s *Server) executeCode(ctx context.Context, c *call, in ExecuteCodeArgs) (ExecuteCodeResult, []mcp.Content, error) {
	resp, release, err := s.sess.ExecuteCode(ctx, api.SessionExecuteRequest{Code: in.Code, Language: in.Language, SessionID: in.SessionID,
		Flavor: in.Flavor, Timeout: in.Timeout}, c.codeSink(ctx))
	if err != nil {
		return ExecuteCodeResult{}, nil, err
	}
	c.release(release)
	out := ExecuteCodeResult{SessionID: resp.SessionID, Created: resp.Created, ExpiresAt: resp.ExpiresAt, Language: resp.Language,
		Stdout: resp.Output.Stdout, Stderr: resp.Output.Stderr, Success: resp.Success, ExecutionTime: resp.ExecutionTime,
		Result: resp.Result, Error: resp.Error, StateLost: resp.StateLost}
	texts := []*string{&out.Stdout, &out.Stderr, &out.Result}
	if resp.Error != nil {
		e := *resp.Error
		out.Error = &e
		texts = append(texts, &e.Value, &e.Traceback)
	}
	out.Truncated = capTexts(texts...) || resp.Truncated
	if !resp.Success {
		return out, images(resp.Results), &shownError{v: out}
	}
	return out, images(resp.Results), nil
}

func (s *Server) executeCommand(ctx context.Context, c *call, in ExecuteCommandArgs) (api.SessionCommandResponse, []mcp.Content, error) {
	var sink session.Sink
	if p := c.sink(ctx); p != nil {
		sink = p
	}
	resp, release, err := s.sess.ExecuteCommand(ctx, api.SessionCommandRequest{Command: api.CommandLine{Shell: in.Command},
		SessionID: in.SessionID, Flavor: in.Flavor, Timeout: in.Timeout, Cwd: in.Cwd}, sink)
	if err != nil {
		return api.SessionCommandResponse{}, nil, err
	}
	c.release(release)
	out := *resp
	out.Truncated = capTexts(&out.Stdout, &out.Stderr) || out.Truncated
	return out, nil, nil
}

func (s *Server) writeFile(ctx context.Context, c *call, in WriteFileArgs) (FileResult, []mcp.Content, error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "text":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return FileResult{}, nil, invalid("content is not base64: %v", err)
		}
	default:
		return FileResult{}, nil, invalid("encoding %q: use text or base64", in.Encoding)
	}
	if len(data) > MaxFileBytes {
		return FileResult{}, nil, invalid("the file is %d bytes, above the %d a write takes: write it as files of at most that and join them "+
			"with a command (cat part.* > file), or upload it with POST /api/v1/sandboxes/{id}/files", len(data), MaxFileBytes)
	}
	if err := s.checkTarget(ctx, in.FileTarget); err != nil {
		return FileResult{}, nil, err
	}
	fi, info, err := s.sess.WriteFile(ctx, session.Target(in.FileTarget), in.Path, strings.NewReader(string(data)))
	if err != nil {
		return FileResult{}, nil, err
	}
	return FileResult{Path: fi.Path, Size: fi.Size, SessionRef: sessionOf(info), SandboxID: in.SandboxID}, nil, nil
}

func (s *Server) readFile(ctx context.Context, c *call, in ReadFileArgs) (FileResult, []mcp.Content, error) {
	if in.Encoding != "" && in.Encoding != "text" && in.Encoding != "base64" {
		return FileResult{}, nil, invalid("encoding %q: use text or base64", in.Encoding)
	}
	if err := s.checkTarget(ctx, in.FileTarget); err != nil {
		return FileResult{}, nil, err
	}
	if in.Offset < 0 || in.Length < 0 {
		return FileResult{}, nil, invalid("offset and length must not be negative")
	}
	data, info, err := s.sess.ReadFile(ctx, session.Target(in.FileTarget), in.Path, MaxFileBytes)
	if err != nil {
		return FileResult{}, nil, err
	}
	p, _ := service.CleanPath(in.Path)
	out := FileResult{Path: p, SessionRef: sessionOf(info), SandboxID: in.SandboxID}
	if in.Offset > 0 || in.Length > 0 {
		if in.Offset > int64(len(data)) {
			return FileResult{}, nil, invalid("offset %d is past the end of %s, a file of %d bytes", in.Offset, p, len(data))
		}
		out.Offset, out.FileSize = in.Offset, int64(len(data))
		data = data[in.Offset:]
		if in.Length > 0 && in.Length < int64(len(data)) {
			data = data[:in.Length]
		}
	}
	out.Size = int64(len(data))
	if in.Encoding == "base64" || (in.Encoding == "" && !utf8.Valid(data)) {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	} else {
		out.Content, out.Encoding = strings.ToValidUTF8(string(data), "\uFFFD"), "text"
	}
	if fits := fitsMessage(out.Content, MaxResultText); fits < len(out.Content) {
		if out.Encoding == "base64" {
			fits = fits / 4 * 3
		}
		return FileResult{}, nil, invalid("the %d bytes of %s to read take more of a result than the MCP server sends at once: "+
			"read it in parts with offset and length (a length of %d fits here)", len(data), p, fits)
	}
	return out, nil, nil
}

func (s *Server) listFiles(ctx context.Context, c *call, in ListFilesArgs) (ListFilesResult, []mcp.Content, error) {
	if err := s.checkTarget(ctx, in.FileTarget); err != nil {
		return ListFilesResult{}, nil, err
	}
	if err := checkOffset(in.Offset); err != nil {
		return ListFilesResult{}, nil, err
	}
	files, info, err := s.sess.ListFiles(ctx, session.Target(in.FileTarget), in.Path)
	if err != nil {
		return ListFilesResult{}, nil, err
	}
	p, _ := service.CleanPath(in.Path)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	out := ListFilesResult{Path: p, Total: len(files), SessionRef: sessionOf(info)}
	part, err := fit(&out, &out.Files, files, in.Offset, p)
	out.ListPart = part
	return out, nil, err
}

func sessionOf(info *api.SessionInfo) SessionRef {
	if info == nil {
		return SessionRef{}
	}
	return SessionRef{SessionID: info.SessionID, ExpiresAt: &info.ExpiresAt}
}

func (s *Server) listSessions(ctx context.Context, c *call, in ListArgs) (ListSessionsResult, []mcp.Content, error) {
	list, err := s.sess.List(ctx)
	if err != nil {
		return ListSessionsResult{}, nil, err
	}
	out := ListSessionsResult{Total: len(list)}
	part, err := fit(&out, &out.Sessions, list, in.Offset, "sessions")
	out.ListPart = part
	return out, nil, err
}

func (s *Server) getSession(ctx context.Context, c *call, in SessionArgs) (api.Session, []mcp.Content, error) {
	sess, err := s.sess.Get(ctx, in.SessionID)
	if err != nil {
		return api.Session{}, nil, err
	}
	return *sess, nil, nil
}

func (s *Server) stopSession(ctx context.Context, c *call, in SessionArgs) (StopSessionResult, []mcp.Content, error) {
	if err := s.sess.Delete(ctx, in.SessionID); err != nil {
		return StopSessionResult{}, nil, err
	}
	return StopSessionResult{SessionID: in.SessionID, Status: "stopped", Message: "Session stopped successfully"}, nil, nil
}

func (s *Server) getStats(ctx context.Context, c *call, _ NoArgs) (api.Stats, []mcp.Content, error) {
	st, err := s.sess.Stats(ctx)
	if err != nil {
		return api.Stats{}, nil, err
	}
	return *st, nil, nil
}

// sink returns the progress sink of the call, or nil when the client asked
// for no progress.
func (c *call) sink(ctx context.Context) *progressSink {
	token := c.req.Params.GetProgressToken()
	if token == nil || c.req.Session == nil {
		return nil
	}
	return &progressSink{ctx: ctx, session: c.req.Session, token: token}
}

// codeSink is sink as a service.Sink (nil when there is none).
func (c *call) codeSink(ctx context.Context) service.Sink {
	if p := c.sink(ctx); p != nil {
		return p
	}
	return nil
}

// progressSink sends an execution's output as progress notifications,
// each carrying a chunk of output in its message. Failing to send one
// does not end the execution.
type progressSink struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any

	mu sync.Mutex
	n  int
}

func (p *progressSink) notify(msg string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.n), Message: msg})
	return nil
}

func (p *progressSink) Stdout(text string) error { return p.notify(text) }
func (p *progressSink) Stderr(text string) error { return p.notify(text) }
func (p *progressSink) Result(r api.ExecutionResult) error {
	if r.PNG != "" || r.JPEG != "" {
		return p.notify("[figure]")
	}
	if r.Text != "" && !r.IsMainResult {
		return p.notify(r.Text + "\n")
	}
	return nil
}
