package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Sessions (seed 000): a session is a sandbox that requests name by an id
// of the client's choosing, with one live interpreter per language, made
// on first use and removed after it has been idle for its timeout.
//
//	POST   /sessions/execute                SessionExecuteRequest → SessionExecuteResponse
//	POST   /sessions/command                SessionCommandRequest → SessionCommandResponse
//	POST   /sessions/{id}/execute           the same, the session named in the path
//	POST   /sessions/{id}/command
//	GET    /sessions                        → SessionList
//	GET    /sessions/{id}                   → Session
//	DELETE /sessions/{id}                   → DeleteSessionResponse
//	POST   /sessions/{id}/keepalive         KeepAliveRequest → Session
//	GET    /stats                           → Stats
//
// A request without a session id makes a new session with a generated id;
// one naming a session that does not exist makes it under that id (never
// an error). With API keys on, sessions are the key's own: another key
// naming the same id reaches another session.

// Flavors: the sandbox sizes of a session. More can be configured.
const (
	FlavorSmall  = "small"  // 1 CPU, 1 GiB: the default
	FlavorMedium = "medium" // 2 CPUs, 2 GiB
	FlavorLarge  = "large"  // 4 CPUs, 4 GiB
)

// SessionExecuteRequest is the body of POST /sessions/execute.
type SessionExecuteRequest struct {
	Code string `json:"code"`
	// Language is python (default), javascript or bash.
	Language string `json:"language,omitempty"`
	// SessionID names the session; empty makes a new one.
	SessionID string `json:"session_id,omitempty"`
	// Flavor sizes a new session's sandbox (default: the daemon's,
	// small); it is ignored for a session that exists.
	Flavor string `json:"flavor,omitempty"`
	// Timeout is in seconds (default 30).
	Timeout float64 `json:"timeout,omitempty"`
	// Env is as in ExecuteRequest: variables for this execution
	// (agent2env addition).
	Env map[string]string `json:"env,omitempty"`
}

// SessionExecuteResponse is the result of code run in a session: the
// context execution's result, with the session it ran in.
type SessionExecuteResponse struct {
	SessionInfo
	// Language is the interpreter the code ran in.
	Language string `json:"language"`
	ExecuteResponse
}

// SessionInfo is what every session response says of its session.
type SessionInfo struct {
	SessionID string `json:"session_id"`
	// Created says the request made the session (it did not exist).
	Created bool `json:"created"`
	// ExpiresAt is the idle deadline after this request.
	ExpiresAt time.Time `json:"expires_at"`
}

// CommandLine is a command: an argv array, or a string run by
// `bash -c`. On the wire it is either a JSON array or a JSON string.
type CommandLine struct {
	Argv  []string `json:"-"`
	Shell string   `json:"-"`
}

// MarshalJSON writes argv as an array, or, when Argv is empty and Shell is
// set (or Argv is nil), the shell string as a string. An empty, non-nil Argv
// without a shell string stays an empty array, as UnmarshalJSON reads it.
func (c CommandLine) MarshalJSON() ([]byte, error) {
	if len(c.Argv) == 0 && (c.Argv == nil || c.Shell != "") {
		return json.Marshal(c.Shell)
	}
	return json.Marshal(c.Argv)
}

// UnmarshalJSON reads a string or an array of strings.
func (c *CommandLine) UnmarshalJSON(b []byte) error {
	*c = CommandLine{}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.Shell)
	}
	if err := json.Unmarshal(b, &c.Argv); err != nil {
		return fmt.Errorf("command must be a string or an array of strings")
	}
	if c.Argv == nil {
		c.Argv = []string{}
	}
	return nil
}

// SessionCommandRequest is the body of POST /sessions/command.
type SessionCommandRequest struct {
	Command   CommandLine       `json:"command"`
	SessionID string            `json:"session_id,omitempty"`
	Flavor    string            `json:"flavor,omitempty"`
	Timeout   float64           `json:"timeout,omitempty"` // seconds, default 30
	Cwd       string            `json:"cwd,omitempty"`     // default /workspace
	Env       map[string]string `json:"env,omitempty"`
	// OutputEncoding is as in ExecRequest (agent2env addition).
	OutputEncoding string `json:"output_encoding,omitempty"`
}

// SessionCommandResponse is the result of a command run in a session.
type SessionCommandResponse struct {
	SessionInfo
	ExecResponse
}

// Session is a session's state.
type Session struct {
	SessionID string `json:"session_id"`
	Flavor    string `json:"flavor"`
	CPU       string `json:"cpu"`
	Memory    string `json:"memory"`
	SandboxID string `json:"sandbox_id"`
	// Languages are those with a live interpreter in the session.
	Languages  []string  `json:"languages"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	// ExpiresAt is the idle deadline: the session goes then unless used.
	ExpiresAt time.Time `json:"expires_at"`
	// EndsAt is the end of its maximum lifetime, if the daemon sets one.
	EndsAt *time.Time `json:"ends_at,omitempty"`
	// IdleTimeout is in seconds.
	IdleTimeout float64 `json:"idle_timeout"`
	// Busy counts the requests running in the session now.
	Busy           int `json:"busy"`
	ExecutionCount int `json:"execution_count"`
	ErrorCount     int `json:"error_count"`
	// ExecutionTime is the total time of its executions, in seconds.
	ExecutionTime float64 `json:"execution_time"`
	// MadeBySandbox is the sandbox whose code made the session through the
	// daemon's MCP server: the session is that sandbox's (its id is in the
	// sandbox's namespace, not the API key's), counts against its limits
	// and ends with it. The key that made the sandbox sees it in lists.
	MadeBySandbox string `json:"made_by_sandbox,omitempty"`
	// MadeByRun is the task run whose agent made the session, the same
	// way; the key that submitted the run sees it in lists.
	MadeByRun string `json:"made_by_run,omitempty"`
}

// SessionList is the body of GET /sessions.
type SessionList struct {
	Items []Session `json:"items"`
	// Total is the number of sessions listed: on this page, with a limit.
	Total int `json:"total"`
	// NextCursor, given as cursor, asks for the page after this one
	// (agent2env addition); it is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// DeleteSessionResponse is the body of DELETE /sessions/{id}.
type DeleteSessionResponse struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"` // "deleted"
}

// KeepAliveRequest is the body of POST /sessions/{id}/keepalive (it may be
// empty).
type KeepAliveRequest struct {
	// IdleTimeout, in seconds, replaces the session's idle timeout; 0
	// keeps it. The idle deadline moves to now plus the timeout.
	IdleTimeout float64 `json:"idle_timeout,omitempty"`
}

// Usage is the load a resource error reports: what exists and what the
// daemon allows.
type Usage struct {
	// Sandboxes counts every sandbox record, as MaxSandboxes does.
	Sandboxes    int `json:"sandboxes"`
	MaxSandboxes int `json:"max_sandboxes,omitempty"`
	Sessions     int `json:"sessions"`
	IdleSessions int `json:"idle_sessions"`
	// MilliCPU and MemoryBytes are the limits of the pending, running and
	// paused sandboxes, warm pools' included; their capacities are the
	// host's times the overcommit ratios.
	MilliCPU            int64 `json:"millicpu"`
	MilliCPUCapacity    int64 `json:"millicpu_capacity"`
	MemoryBytes         int64 `json:"memory_bytes"`
	MemoryBytesCapacity int64 `json:"memory_bytes_capacity"`
}

// ResourceError is the body of a 429 RESOURCE_LIMIT or 507
// INSUFFICIENT_CAPACITY: the error, the usage and what to do.
type ResourceError struct {
	Error
	Usage      Usage  `json:"usage"`
	Suggestion string `json:"suggestion"`
}

// resourceFields are ResourceError's fields beside Error's.
type resourceFields struct {
	Usage      Usage  `json:"usage"`
	Suggestion string `json:"suggestion"`
}

// MarshalJSON writes the error's fields, then the usage and suggestion
// (without it, Error's MarshalJSON, promoted, would leave them out).
func (r ResourceError) MarshalJSON() ([]byte, error) {
	e := r.Error
	e.Details = make(map[string]any, len(r.Details)+2)
	for k, v := range r.Details {
		e.Details[k] = v
	}
	e.Details["usage"], e.Details["suggestion"] = r.Usage, r.Suggestion
	return e.MarshalJSON()
}

// UnmarshalJSON reads the usage and suggestion, and the rest as Error
// does.
func (r *ResourceError) UnmarshalJSON(b []byte) error {
	var f resourceFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if err := r.Error.UnmarshalJSON(b); err != nil {
		return err
	}
	delete(r.Details, "usage")
	delete(r.Details, "suggestion")
	if len(r.Details) == 0 {
		r.Details = nil
	}
	r.Usage, r.Suggestion = f.Usage, f.Suggestion
	return nil
}

// Stats is the body of GET /stats.
type Stats struct {
	Sessions SessionStats `json:"sessions"`
	// Sandboxes counts sandboxes by status; those waiting in warm pools
	// are "pooled".
	Sandboxes map[string]int `json:"sandboxes"`
	// Resources are committed (limits of pending, running and paused sandboxes)
	// and used (measured now) against capacity.
	Resources  ResourceStats  `json:"resources"`
	Executions ExecutionStats `json:"executions"`
	// WarmPools are the daemon's warm pools, by name (agent2env
	// addition); empty without any.
	WarmPools []WarmPool `json:"warm_pools"`
}

// WarmPool is the state of one warm pool: Ready sandboxes of the Size it
// keeps, and the requests it served (Hits) and could not (Misses) since
// the daemon started.
type WarmPool struct {
	Name   string `json:"name"`
	Ready  int    `json:"ready"`
	Size   int    `json:"size"`
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
}

// SessionStats counts sessions.
type SessionStats struct {
	Active int `json:"active"`
	// Busy are those with a request running in them now.
	Busy int `json:"busy"`
}

// ResourceStats is cpu and memory committed, used and available.
type ResourceStats struct {
	MilliCPUCommitted    int64 `json:"millicpu_committed"`
	MilliCPUCapacity     int64 `json:"millicpu_capacity"`
	MemoryBytesCommitted int64 `json:"memory_bytes_committed"`
	MemoryBytesCapacity  int64 `json:"memory_bytes_capacity"`
	// CPUSecondsUsed is the cpu time running sandboxes have used;
	// MemoryBytesUsed their memory now.
	CPUSecondsUsed  float64 `json:"cpu_seconds_used"`
	MemoryBytesUsed int64   `json:"memory_bytes_used"`
}

// ExecutionStats are the executions (code and commands) in sessions and
// contexts since the daemon started; times are in seconds over the most
// recent ones.
type ExecutionStats struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	P50    float64 `json:"p50"`
	P95    float64 `json:"p95"`
}
