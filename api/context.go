package api

import "time"

// Code-interpreter contexts (seed 001): a context is a live interpreter in
// a sandbox whose state persists between executions.
//
//	POST   /contexts                       CreateContextRequest → Context
//	GET    /contexts                       → ContextList
//	GET    /contexts/{id}                  → Context
//	DELETE /contexts/{id}                  → DeleteContextResponse
//	POST   /contexts/{id}/execute          ExecuteRequest → ExecuteResponse
//	POST   /contexts/{id}/execute/stream   ExecuteRequest → Server-Sent Events
//
// and the same under /sandboxes/{id}/contexts for contexts in a given
// sandbox.

// Context languages. Aliases accepted on input: "py", "python3" for
// python; "js", "node", "nodejs" for javascript; "sh", "shell" for bash.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageBash       = "bash"
)

// ContextTypeJupyter is the only context type, and the default.
const ContextTypeJupyter = "jupyter"

// ContextStatusActive is the status of every context that exists.
const ContextStatusActive = "active"

// Context error codes.
const (
	CodeContextNotFound = "CONTEXT_NOT_FOUND"  // 404
	CodeInvalidLanguage = "INVALID_LANGUAGE"   // 400
	CodeLanguageMissing = "LANGUAGE_NOT_FOUND" // 400: the image has no interpreter for it
)

// CreateContextRequest is the body of POST /contexts (seed 001) and of
// POST /sandboxes/{id}/contexts.
type CreateContextRequest struct {
	// Type is "jupyter" (the default and only type).
	Type string `json:"type,omitempty"`
	// Language is python (default), javascript or bash.
	Language string `json:"language,omitempty"`
	// SessionName is the session (see Session) the context is in: the
	// session's contexts share its sandbox (its files). A session that
	// does not exist is made.
	SessionName string `json:"session_name,omitempty"`
	// WorkingDir is the interpreter's working directory (default
	// /workspace).
	WorkingDir string `json:"working_dir,omitempty"`
	// agent2env additions.
	// SandboxID puts the context in an existing sandbox (the path form sets
	// it).
	SandboxID string `json:"sandbox_id,omitempty"`
	// Template is the template of a sandbox the daemon creates for the
	// context (default: the language's default template). Beside
	// SandboxID it must be that sandbox's template (400 else).
	Template string `json:"template,omitempty"`
	// Env is added to the interpreter's environment.
	Env map[string]string `json:"env,omitempty"`
	// Name and Description are labels kept with the context (seed 004).
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Flavor sizes the sandbox of a session the create makes (see
	// Session); it is ignored otherwise.
	Flavor string `json:"flavor,omitempty"`
}

// Context is a code-interpreter context.
type Context struct {
	ContextID string    `json:"context_id"`
	Type      string    `json:"type"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// agent2env additions.
	Language       string    `json:"language"`
	SessionName    string    `json:"session_name,omitempty"`
	WorkingDir     string    `json:"working_dir"`
	SandboxID      string    `json:"sandbox_id"`
	LastUsedAt     time.Time `json:"last_used_at"`
	ExecutionCount int       `json:"execution_count"`
	Name           string    `json:"name,omitempty"`
	Description    string    `json:"description,omitempty"`
	// MadeBySandbox is the sandbox whose code made the context through the
	// daemon's MCP server: it is that sandbox's, counts against its
	// limits and ends with it. The key that made the sandbox sees it in
	// lists.
	MadeBySandbox string `json:"made_by_sandbox,omitempty"`
	// MadeByRun is the task run whose agent made the context, the same
	// way; the key that submitted the run sees it in lists.
	MadeByRun string `json:"made_by_run,omitempty"`
}

// ContextList is the body of GET /contexts.
type ContextList struct {
	Items []Context `json:"items"`
	// Contexts repeats Items for clients of seed 001's service.
	Contexts []Context `json:"contexts"`
	// Total is the number of contexts listed: on this page, with a limit.
	Total int `json:"total"`
	// NextCursor, given as cursor, asks for the page after this one
	// (agent2env addition); it is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// DeleteContextResponse is the body of DELETE /contexts/{id}.
type DeleteContextResponse struct {
	ContextID string `json:"context_id"`
	Status    string `json:"status"` // "deleted"
	Message   string `json:"message"`
}

// ExecuteRequest is the body of POST /contexts/{id}/execute.
type ExecuteRequest struct {
	Code string `json:"code"`
	// Timeout is in seconds (default 30). When it elapses the execution
	// is interrupted and the context stays usable.
	Timeout float64 `json:"timeout,omitempty"`
	// Env sets variables in the interpreter's environment for this
	// execution (the processes it starts see them); what they replaced is
	// put back after it. An agent2env addition.
	Env map[string]string `json:"env,omitempty"`
}

// ExecuteResponse is the result of one execution.
type ExecuteResponse struct {
	Output  ExecutionOutput `json:"output"`
	Success bool            `json:"success"`
	// ExecutionTime is the wall time of the execution in seconds.
	ExecutionTime float64 `json:"execution_time"`
	// agent2env additions.
	ContextID      string `json:"context_id"`
	ExecutionCount int    `json:"execution_count"`
	// Result is the plain-text value of the last expression, if any.
	Result string `json:"result,omitempty"`
	// Results are the rich outputs: displayed values and figures in the
	// order they were produced, then the last expression's value.
	Results []ExecutionResult `json:"results"`
	Error   *ExecutionError   `json:"error,omitempty"`
	// StateLost says the interpreter was restarted (it could not be
	// interrupted, or it died): variables and imports are gone.
	StateLost bool `json:"state_lost,omitempty"`
	// Truncated says output was dropped, beyond the daemon's cap or its
	// budget for buffered output; a marker line says how much and why.
	Truncated bool `json:"truncated,omitempty"`
}

// ExecutionOutput is the captured output of an execution.
type ExecutionOutput struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// ExecutionResult is one rich output, a MIME bundle with one field per
// representation (binary ones base64-encoded).
type ExecutionResult struct {
	Text       string `json:"text,omitempty"`       // text/plain
	HTML       string `json:"html,omitempty"`       // text/html
	Markdown   string `json:"markdown,omitempty"`   // text/markdown
	SVG        string `json:"svg,omitempty"`        // image/svg+xml
	PNG        string `json:"png,omitempty"`        // image/png, base64
	JPEG       string `json:"jpeg,omitempty"`       // image/jpeg, base64
	LaTeX      string `json:"latex,omitempty"`      // text/latex
	JSON       any    `json:"json,omitempty"`       // application/json
	JavaScript string `json:"javascript,omitempty"` // application/javascript
	// IsMainResult marks the value of the last expression.
	IsMainResult bool `json:"is_main_result,omitempty"`
}

// Error kinds of an ExecutionError.
const (
	ErrorKindSyntax  = "syntax"  // the code did not parse
	ErrorKindRuntime = "runtime" // the code raised or exited non-zero
	ErrorKindSystem  = "system"  // timeout, out of memory, interpreter or sandbox gone
)

// Names of system errors.
const (
	ErrorNameTimeout     = "TimeoutError"
	ErrorNameKernelDied  = "KernelDied"
	ErrorNameOutOfMemory = "OutOfMemory"
	ErrorNameSandboxGone = "SandboxGone" // went while the code ran (one paused or stopped before is SANDBOX_NOT_READY)
)

// ExecutionError is why an execution did not succeed.
type ExecutionError struct {
	Name      string `json:"name"`  // e.g. ZeroDivisionError, SyntaxError, TimeoutError
	Value     string `json:"value"` // the message
	Traceback string `json:"traceback"`
	Kind      string `json:"kind"` // syntax, runtime or system
}

// Events of POST /contexts/{id}/execute/stream, in order: any number of
// "stdout", "stderr" (ExecutionOutputEvent) and "result" (ExecutionResult)
// events as they are produced, at most one "error" (ExecutionError), and a
// final "complete" (ExecuteResponse without the output already streamed).
// A request that fails midway ends with an "error" event carrying an Error
// body instead ({"error", "code"}).
const (
	EventStdout   = "stdout"
	EventStderr   = "stderr"
	EventResult   = "result"
	EventError    = "error"
	EventComplete = "complete"
)

// ExecutionOutputEvent is the data of a stdout or stderr event.
type ExecutionOutputEvent struct {
	Text string `json:"text"`
}
