package api

import "time"

// SandboxStatus is the lifecycle state of a sandbox.
type SandboxStatus string

// Sandbox statuses, as LiteBoxd names them.
const (
	StatusPending SandboxStatus = "pending"
	StatusRunning SandboxStatus = "running"
	// StatusPaused: its processes are frozen in memory (agent2env
	// addition; POST /sandboxes/{id}/pause and /resume). LiteBoxd's
	// clients have no such status: the API's JSON gives it as state,
	// and running as status (SandboxStatus.LiteBoxd).
	StatusPaused      SandboxStatus = "paused"
	StatusSucceeded   SandboxStatus = "succeeded"
	StatusFailed      SandboxStatus = "failed"
	StatusTerminating SandboxStatus = "terminating"
	StatusUnknown     SandboxStatus = "unknown"
)

// Sandbox is a sandbox as the API returns it. Its JSON (MarshalJSON)
// has Status twice: as status, in LiteBoxd's enum (running for paused),
// and as state, as it is.
type Sandbox struct {
	ID              string            `json:"id"`
	Image           string            `json:"image"`
	CPU             string            `json:"cpu"`
	Memory          string            `json:"memory"`
	TTL             int               `json:"ttl"`
	Env             map[string]string `json:"env,omitempty"`
	Status          SandboxStatus     `json:"status"`
	Template        string            `json:"template,omitempty"`
	TemplateVersion int               `json:"templateVersion,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	// ExpiresAt is when the TTL ends; Never when ttl is 0 (LiteBoxd
	// clients require the field).
	ExpiresAt   time.Time `json:"expires_at"`
	AccessToken string    `json:"accessToken,omitempty"`
	AccessURL   string    `json:"accessUrl,omitempty"`
	// Reason says why the sandbox is in its status (agent2env addition).
	Reason string `json:"reason,omitempty"`
	// Metadata is the labels its client gave it (agent2env addition; the
	// OpenSandbox API's metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Terminals are its persistent terminals, running and ended (agent2env
	// addition): in the answer of GET /sandboxes/{id} of a running
	// sandbox only.
	Terminals []TerminalInfo `json:"terminals,omitempty"`
	// Network is what it may reach beyond its loopback through the egress
	// proxy (agent2env addition): its template's network section, or the
	// network it was created with; absent: nothing.
	Network *NetworkSpec `json:"network,omitempty"`
	// Contexts, in the answer of a create with FromSnapshot only
	// (agent2env addition), maps the id of each code-interpreter context
	// of the snapshot to the id of the same context in this sandbox, as
	// ForkedSandbox.Contexts does; absent when the snapshot holds none.
	Contexts map[string]string `json:"contexts,omitempty"`
}

// Never is the expires_at of a sandbox whose ttl is 0.
var Never = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// SandboxOverrides change a template's defaults for one sandbox.
type SandboxOverrides struct {
	CPU    string            `json:"cpu,omitempty"`
	Memory string            `json:"memory,omitempty"`
	TTL    *int              `json:"ttl,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
}

// CreateSandboxRequest is the body of POST /sandboxes. Either Template
// (LiteBoxd) or Image (agent2env addition) names what to run; with Image,
// CPU, Memory, TTL and Env may be given at the top level.
type CreateSandboxRequest struct {
	Template        string            `json:"template,omitempty"`
	TemplateVersion int               `json:"templateVersion,omitempty"`
	Overrides       *SandboxOverrides `json:"overrides,omitempty"`

	Image  string            `json:"image,omitempty"`
	CPU    string            `json:"cpu,omitempty"`
	Memory string            `json:"memory,omitempty"`
	TTL    *int              `json:"ttl,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Metadata labels the sandbox, from an image or a template (agent2env
	// addition).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Network, with Image, is what the sandbox may reach beyond its
	// loopback through the daemon's egress proxy, as a template's network
	// section gives it (agent2env addition); a template's sandboxes have
	// the template's.
	Network *NetworkSpec `json:"network,omitempty"`
	// FromSnapshot makes the sandbox from a snapshot (agent2env addition):
	// its processes, memory and files as they were saved, under a new id,
	// with TTL and Metadata from this request; nothing else may be given.
	FromSnapshot string `json:"from_snapshot,omitempty"`
}

// ExecRequest is the body of POST /sandboxes/{id}/exec.
type ExecRequest struct {
	Command []string `json:"command"`
	// Timeout in seconds; 0 means the server default (30 s).
	Timeout int `json:"timeout,omitempty"`
	// Env, Cwd and Stdin are agent2env additions.
	Env   map[string]string `json:"env,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	Stdin string            `json:"stdin,omitempty"`
	// OutputEncoding (agent2env addition) is how the output travels:
	// OutputText (or empty, what LiteBoxd clients get) as UTF-8 text,
	// each invalid byte replaced by U+FFFD; OutputBase64 as the base64 of
	// the exact bytes, the response (or each output event) marked with
	// Encoding "base64".
	OutputEncoding string `json:"output_encoding,omitempty"`
}

// ExecResponse is the result of a command.
type ExecResponse struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// agent2env additions.
	TimedOut bool `json:"timed_out,omitempty"`
	// Truncated says output was dropped: past the daemon's limit per
	// stream, or because the memory it gives to buffered output, shared
	// by all executions, was in use.
	Truncated  bool    `json:"truncated,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// OOMKilled says the out-of-memory killer ended the command (the
	// sandbox reached its memory limit); Reason is then ExecOutOfMemory.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Reason names a cause of the outcome beyond the command's own doing
	// (ExecOutOfMemory, ExecPidsExhausted); stderr says so too.
	Reason string `json:"reason,omitempty"`
	// Encoding is OutputBase64 when Stdout and Stderr are base64 (the
	// request asked for it); empty, they are text. DecodeOutput undoes it.
	Encoding string `json:"encoding,omitempty"`
}

// Reasons of an ExecResponse or exit ExecEvent.
const (
	// ExecOutOfMemory: the out-of-memory killer ended the command.
	ExecOutOfMemory = "OutOfMemory"
	// ExecPidsExhausted: the command could not start because the
	// sandbox has reached its process limit (exit code 126).
	ExecPidsExhausted = "PidsExhausted"
)

// ExecEvent is the data of one Server-Sent Event of the streaming exec
// response (POST /sandboxes/{id}/exec/stream): "stdout" and "stderr"
// events carry output chunks as they are produced, the final "exit" event
// the exit code; an "error" event (an Error body) ends a failed stream.
type ExecEvent struct {
	Type string `json:"type"` // "stdout", "stderr" or "exit"
	Data string `json:"data,omitempty"`
	// Encoding is OutputBase64 when Data is base64 (the request asked for
	// it); empty, Data is text. DecodeOutput undoes it.
	Encoding string  `json:"encoding,omitempty"`
	ExitCode int     `json:"exit_code,omitempty"`
	TimedOut bool    `json:"timed_out,omitempty"`
	Duration float64 `json:"duration_ms,omitempty"`
	// OOMKilled and Reason are as in ExecResponse (exit event).
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Signal names the signal that ended the command ("SIGKILL"; its
	// ExitCode is then 128+n), for the surfaces that report such an end
	// in a form of their own; the REST stream does not carry it.
	Signal string `json:"-"`
}

// LogsResponse is the body of GET /sandboxes/{id}/logs.
type LogsResponse struct {
	Logs   string   `json:"logs"`
	Events []string `json:"events"`
	// EventsDropped is how many of the sandbox's oldest events were
	// dropped, its history keeping the newest 1000 (agent2env addition;
	// absent when none were).
	EventsDropped int `json:"events_dropped,omitempty"`
}

// FileInfo describes a file in a sandbox (agent2env addition).
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
	IsDir   bool      `json:"is_dir"`
}

// List is the shape of every list response.
type List[T any] struct {
	Items []T `json:"items"`
}

// SandboxList is a list of sandboxes, or one page of it (agent2env
// addition: GET /api/v1/sandboxes?limit=N&cursor=C).
type SandboxList struct {
	Items []Sandbox `json:"items"`
	// NextCursor, given as cursor, asks for the page after this one; it
	// is absent on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// MaxPageSize is the largest page a list gives.
const MaxPageSize = 1000

// Order is the order of a paged list by creation time (agent2env
// addition: the order query parameter): its items, and the pages its
// cursors ask for, run that way.
type Order string

// The orders of a paged list.
const (
	// OrderAsc lists oldest first: every list's default.
	OrderAsc Order = "asc"
	// OrderDesc lists newest first.
	OrderDesc Order = "desc"
)
