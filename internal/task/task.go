// Package task reads task files: what the task runner is asked to do, in
// YAML or JSON — which agent, which model, which MCP servers, the goal, the
// inputs copied in, how to tell success, what to bring back. The field
// names are a contract published as a JSON Schema (api/task.schema.json);
// the loader and the schema accept the same files (tested on a table).
//
// Load validates everything it can without a daemon and reports every
// problem at once, each with its field path and line. A loaded Task has
// its defaults filled in and is read-only by convention; it holds nothing
// that ties it to a goroutine.
package task

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The agents a task can name. AgentCustom runs the task's entrypoint
// instead of a known CLI.
const (
	AgentClaudeCode = "claude-code"
	AgentCodex      = "codex"
	AgentGeminiCLI  = "gemini-cli"
	AgentOpencode   = "opencode"
	AgentQwenCode   = "qwen-code"
	AgentCustom     = "custom"
)

// Agents lists every agent name a task may use, in the schema's order.
var Agents = []string{AgentClaudeCode, AgentCodex, AgentGeminiCLI, AgentOpencode, AgentQwenCode, AgentCustom}

// OwnMCPServer is the name of the daemon's own MCP server: an mcp entry
// with this name and neither url nor command means "agent2env's shared
// server, scoped to the run".
const OwnMCPServer = "agent2env"

// Defaults filled in by Load for fields a file leaves out.
const (
	DefaultImage     = "agent2env/agent"
	DefaultWorkdir   = "/workspace"
	DefaultTimeout   = Duration(30 * time.Minute)
	DefaultIdle      = Duration(5 * time.Minute)
	DefaultHeartbeat = Duration(30 * time.Second)
	DefaultRepeats   = 1
	// MaxTimeout bounds end.timeout: the agent is one command in the
	// sandbox, which runs at most this long (the sandbox service's
	// exec limit), so a longer timeout would never be reached.
	MaxTimeout = Duration(24 * time.Hour)
	// MaxRepeats bounds repeats so that a typo cannot start thousands of
	// sandboxes.
	MaxRepeats = 1000
)

// Task is one task file, decoded and validated.
type Task struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Template or Image says what the sandbox is made from; never both.
	// With neither, Image is DefaultImage.
	Template  string     `yaml:"template,omitempty" json:"template,omitempty"`
	Image     string     `yaml:"image,omitempty" json:"image,omitempty"`
	Resources *Resources `yaml:"resources,omitempty" json:"resources,omitempty"`
	Agent     string     `yaml:"agent" json:"agent"`
	// Model is a model name of the LLM proxy's configuration; required
	// unless Agent is custom.
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
	// Goal is the instruction given to the agent.
	Goal string `yaml:"goal" json:"goal"`
	// Entrypoint is a shell command run in Workdir: for custom agents the
	// agent itself, for the others a start script run before the agent.
	Entrypoint string            `yaml:"entrypoint,omitempty" json:"entrypoint,omitempty"`
	Workdir    string            `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	Env        map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Inputs     []Input           `yaml:"inputs,omitempty" json:"inputs,omitempty"`
	// Setup commands run in Workdir, in order, before the agent.
	Setup     []string    `yaml:"setup,omitempty" json:"setup,omitempty"`
	MCP       []MCPServer `yaml:"mcp,omitempty" json:"mcp,omitempty"`
	End       End         `yaml:"end,omitempty" json:"end"`
	Liveness  Liveness    `yaml:"liveness,omitempty" json:"liveness"`
	Artifacts []string    `yaml:"artifacts,omitempty" json:"artifacts,omitempty"`
	Repeats   int         `yaml:"repeats,omitempty" json:"repeats"`

	// Dir is the directory of the task file, which input sources are
	// relative to; empty when the task did not come from a file.
	Dir string `yaml:"-" json:"-"`
}

// Resources are the sandbox's limits, in the API's quantity syntax.
type Resources struct {
	CPU    Quantity `yaml:"cpu,omitempty" json:"cpu,omitempty"`
	Memory Quantity `yaml:"memory,omitempty" json:"memory,omitempty"`
	Disk   Quantity `yaml:"disk,omitempty" json:"disk,omitempty"`
}

// Quantity is a resource quantity in the API's syntax ("500m", "512Mi");
// a file may write a plain number, which is kept as its decimal text.
type Quantity string

// Input is a file or directory copied into the sandbox before anything
// runs. Source is relative to the task file's directory and never leaves
// it, through a symbolic link neither (CheckInputs); Destination is an
// absolute path in the sandbox.
type Input struct {
	Source      string `yaml:"source" json:"source"`
	Destination string `yaml:"destination" json:"destination"`
}

// MCPServer is an MCP server the agent is given. Exactly one of URL (a
// remote server, reached through the egress rules) and Command (a local
// server the agent CLI starts inside the sandbox) is set, except for the
// daemon's own server (Name OwnMCPServer), which has neither.
type MCPServer struct {
	Name    string            `yaml:"name" json:"name"`
	URL     string            `yaml:"url,omitempty" json:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	Command []string          `yaml:"command,omitempty" json:"command,omitempty"`
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
}

// Own reports whether s is the daemon's own MCP server.
func (s MCPServer) Own() bool { return s.Name == OwnMCPServer && s.URL == "" && len(s.Command) == 0 }

// End says when a run ends and whether it succeeded: the agent exited with
// ExitCode, SuccessFile (if set) exists and Check (if set) exits 0, all
// within Timeout.
type End struct {
	Timeout     Duration `yaml:"timeout,omitempty" json:"timeout"`
	ExitCode    int      `yaml:"exit_code,omitempty" json:"exit_code"`
	SuccessFile string   `yaml:"success_file,omitempty" json:"success_file,omitempty"`
	Check       string   `yaml:"check,omitempty" json:"check,omitempty"`
}

// Liveness says when a run that still has time left is failed anyway:
// after Idle with no progress on any signal (hung), or after Heartbeat with
// no answer from the sandbox (sandbox lost).
type Liveness struct {
	Idle      Duration `yaml:"idle,omitempty" json:"idle"`
	Heartbeat Duration `yaml:"heartbeat,omitempty" json:"heartbeat"`
}

// Duration is a positive time span, written as Go writes them ("30m",
// "1h30m", "90s") or as a number of seconds.
type Duration time.Duration

// String returns d as Go formats durations.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads what MarshalJSON writes, so that a task's JSON
// (a run's record keeps it) reads back as it was. Task files are read by
// Load, which checks more.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as 30m: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// JSON returns t as JSON in the task file format, defaults included: it
// loads back as the same task.
func (t *Task) JSON() ([]byte, error) { return json.MarshalIndent(t, "", "  ") }

// Validate checks the rules a task must satisfy once loaded; use it after
// changing a loaded task (run overrides). Its errors have no lines.
func (t *Task) Validate() error {
	var errs fieldErrors
	t.check(&errs, nil)
	return errs.err("")
}

func (t *Task) applyDefaults() {
	if t.Template == "" && t.Image == "" {
		t.Image = DefaultImage
	}
	if t.Workdir == "" {
		t.Workdir = DefaultWorkdir
	}
	if t.End.Timeout == 0 {
		t.End.Timeout = DefaultTimeout
	}
	if t.Liveness.Idle == 0 {
		t.Liveness.Idle = DefaultIdle
	}
	if t.Liveness.Heartbeat == 0 {
		t.Liveness.Heartbeat = DefaultHeartbeat
	}
	if t.Repeats == 0 {
		t.Repeats = DefaultRepeats
	}
}

// knownAgent reports whether name is one of Agents.
func knownAgent(name string) bool { return slices.Contains(Agents, name) }

func agentList() string { return strings.Join(Agents, ", ") }

// FieldError is one problem with a task file: the field, as a path such as
// "inputs[0].source", and where it is.
type FieldError struct {
	Field   string `json:"field"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

func (e FieldError) String() string {
	field := e.Field
	if field == "" {
		field = "(task)"
	}
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, field, e.Message)
	}
	return field + ": " + e.Message
}
