package api

import "time"

// Task runs: a task file (task.schema.json) submitted to the daemon runs
// as k runs per agent × model combination, each in its own sandbox,
// watched until it ends; each run's result, event log, agent output and
// artifacts stay on the daemon until the run is deleted.
//
//	POST   /runs                          RunSubmitRequest → RunBatch (201)
//	GET    /runs?batch=&limit=&cursor=    → RunList
//	GET    /runs/{id}                     → Run
//	POST   /runs/{id}/cancel              → Run
//	DELETE /runs/{id}                     (204; a run still going is 409)
//	GET    /runs/{id}/events              text/event-stream of RunEvent ("event" events, then one "end")
//	GET    /runs/{id}/logs                text/plain: the agent's output, stdout and stderr
//	GET    /runs/{id}/artifacts           application/x-tar: every artifact, by its path in the sandbox
//	GET    /runs/{id}/artifacts/{path}    one artifact's content

// RunStatus is where a run is: queued or running, or how it ended.
type RunStatus string

// The statuses of a run. Every status after RunRunning is final.
const (
	RunQueued  RunStatus = "queued"
	RunRunning RunStatus = "running"
	// RunSucceeded: the agent exited with the expected code and the end
	// conditions (success_file, check) hold.
	RunSucceeded RunStatus = "succeeded"
	// RunFailed: the agent exited otherwise, an end condition does not
	// hold, a step before the agent failed, or the daemon restarted.
	RunFailed RunStatus = "failed"
	// RunHung: no progress on any signal (agent output, LLM calls, CPU
	// time, files in the workdir) for the task's liveness.idle.
	RunHung RunStatus = "hung"
	// RunTimeout: the run did not end within the task's end.timeout.
	RunTimeout RunStatus = "timeout"
	// RunSandboxLost: the sandbox stopped answering.
	RunSandboxLost RunStatus = "sandbox_lost"
	// RunCancelled: a client cancelled the run.
	RunCancelled RunStatus = "cancelled"
)

// Final reports whether s is an end state.
func (s RunStatus) Final() bool { return s != RunQueued && s != RunRunning && s != "" }

// The phases of a run, in order; each has its time in Run.Timings.
const (
	PhaseQueued    = "queued"
	PhaseCreate    = "create"
	PhaseInputs    = "inputs"
	PhaseSetup     = "setup"
	PhaseAgent     = "agent"
	PhaseCheck     = "check"
	PhaseArtifacts = "artifacts"
	PhaseDone      = "done"
)

// RunSubmitRequest is the body of POST /runs: a task, given by content
// (Task) or by the name of a file in the daemon's tasks directory
// (TaskName), and overrides. The runs are every combination of Agents ×
// Models, Repeats times each.
type RunSubmitRequest struct {
	// Task is the content of a task file, YAML or JSON.
	Task string `json:"task,omitempty"`
	// TaskName names a task file in the daemon's tasks directory (name,
	// name.yaml, name.yml or name.json); its inputs are read beside it.
	TaskName string `json:"task_name,omitempty"`
	// Inputs is a gzipped tar of the task's input sources, by their
	// paths relative to the task file, in base64 (what `agent2env task
	// run` sends); only with Task.
	Inputs string `json:"inputs,omitempty"`
	// Agents and Models override the task's agent and model; several
	// make a matrix.
	Agents []string `json:"agents,omitempty"`
	Models []string `json:"models,omitempty"`
	// Repeats overrides the task's repeats (k).
	Repeats int `json:"repeats,omitempty"`
	// Parallel is how many of the batch's runs go at once (default: all,
	// within the daemon's limit).
	Parallel int `json:"parallel,omitempty"`
}

// RunBatch is what one submission made.
type RunBatch struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	Runs []Run  `json:"runs"`
}

// Run is one run of a task: its record and, once it ended, its result.
type Run struct {
	ID      string `json:"id"`
	BatchID string `json:"batch_id"`
	// Task is the task's name.
	Task  string `json:"task"`
	Agent string `json:"agent"`
	Model string `json:"model,omitempty"`
	// Repeat is the run's index among its combination's repeats, from 0.
	Repeat int       `json:"repeat"`
	Status RunStatus `json:"status"`
	// Phase is the step the run is in, or PhaseDone.
	Phase string `json:"phase"`
	// Reason says why the run ended as it did.
	Reason string `json:"reason,omitempty"`
	// ExitCode is the agent's, once it exited.
	ExitCode  *int       `json:"exit_code,omitempty"`
	SandboxID string     `json:"sandbox_id,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Timings are each phase's duration in milliseconds (create, inputs,
	// setup, agent, check, artifacts).
	Timings map[string]float64 `json:"timings_ms,omitempty"`
	LLM     RunLLMUsage        `json:"llm"`
	// ConversationID is the LLM proxy's archive of the run's
	// conversation, when it keeps one; the first, when the run had more
	// than one (ConversationIDs, in the order they started).
	ConversationID  string   `json:"conversation_id,omitempty"`
	ConversationIDs []string `json:"conversation_ids,omitempty"`
	// OutputTail holds the last lines of the agent's output.
	OutputTail []string      `json:"output_tail,omitempty"`
	Artifacts  []RunArtifact `json:"artifacts,omitempty"`
	// ArtifactsTruncated says artifacts were left out at the size limit.
	ArtifactsTruncated bool `json:"artifacts_truncated,omitempty"`
	// ArtifactsError says why the artifacts could not be collected, or
	// not all of them (the sandbox was lost with its files, a file could
	// not be read); empty when they all came back.
	ArtifactsError string `json:"artifacts_error,omitempty"`
}

// RunLLMUsage counts a run's model calls and tokens. Source says who
// counted: "proxy" (the LLM proxy, authoritative) or "agent" (what the
// agent CLI reported).
type RunLLMUsage struct {
	Requests     int64  `json:"requests"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	CachedTokens int64  `json:"cached_tokens"`
	Source       string `json:"source,omitempty"`
}

// RunArtifact is a file brought back from a run's sandbox.
type RunArtifact struct {
	// Path is the file's absolute path in the sandbox.
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// RunList is a page of runs, oldest first.
type RunList struct {
	Items      []Run  `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// The types of RunEvent.
const (
	// RunEventPhase: the run entered Phase.
	RunEventPhase = "phase"
	// RunEventOutput: a line the agent (or a setup command or the check)
	// wrote, on Stream.
	RunEventOutput = "output"
	// RunEventAgent: something the agent did, read from its output
	// (Kind: message, tool_call, tool_result, llm_call, result, error).
	RunEventAgent = "agent"
	// RunEventLiveness: a liveness signal's state changed (Text says
	// which), or the sandbox missed a heartbeat.
	RunEventLiveness = "liveness"
	// RunEventEnd: the run ended with Status and Reason; the last event.
	RunEventEnd = "end"
)

// RunEvent is one entry of a run's event log.
type RunEvent struct {
	// Seq numbers the run's events from 1.
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	// Phase is the run's phase when the event happened.
	Phase string `json:"phase,omitempty"`
	// Stream is stdout or stderr for output.
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text,omitempty"`
	// Kind, Tool, ToolID, Input and IsError describe an agent event.
	Kind    string       `json:"kind,omitempty"`
	Tool    string       `json:"tool,omitempty"`
	ToolID  string       `json:"tool_id,omitempty"`
	Input   any          `json:"input,omitempty"`
	IsError bool         `json:"is_error,omitempty"`
	Usage   *RunLLMUsage `json:"usage,omitempty"`
	// Status and Reason end the log.
	Status RunStatus `json:"status,omitempty"`
	Reason string    `json:"reason,omitempty"`
}
