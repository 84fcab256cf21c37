package agent

import (
	"fmt"
	"time"
)

// Kernels are the code interpreters behind code-interpreter contexts: one
// long-lived interpreter process per kernel, run as the sandbox user, whose
// state persists between executions.
//
//	POST   /v1/kernels                                  KernelSpec → KernelInfo (once ready)
//	GET    /v1/kernels                                  → []KernelInfo
//	DELETE /v1/kernels/{id}
//	POST   /v1/kernels/{id}/execute/attach              KernelExecRequest line, frames ⇄ frames
//	POST   /v1/kernels/{id}/executions/{run}/attach?since=N  frames ⇄ frames
//	POST   /v1/kernels/{id}/execute                     KernelExecRequest → frames
//
// An execution streams stdout ('o') and stderr ('e') frames, display
// frames ('d', a JSON MIME bundle) and ends with a result frame ('x', a
// KernelResult). Started by attachment, it runs apart from its request
// and its answer opens with the run's id ('p', KernelRunInfo): a
// checkpoint suspends the request and its client attaches again from the
// frames it has received (kernel_attach.go). The plain POST .../execute,
// which older agents serve, runs it for the life of its request.

// Kernel languages.
const (
	LangPython     = "python"
	LangJavaScript = "javascript"
	LangBash       = "bash"
)

// KernelSpec asks for a new kernel.
type KernelSpec struct {
	// ID names the kernel; the daemon uses the context id.
	ID       string   `json:"id"`
	Language string   `json:"language"`
	Cwd      string   `json:"cwd,omitempty"`
	Env      []string `json:"env,omitempty"`
}

// Validate reports whether the spec can be started.
func (s *KernelSpec) Validate() error {
	switch {
	case s.ID == "" || len(s.ID) > 128:
		return fmt.Errorf("kernel id must be 1 to 128 characters")
	case kernelPrograms[s.Language] == nil:
		return fmt.Errorf("unknown kernel language %q", s.Language)
	}
	return nil
}

// KernelInfo describes a kernel.
type KernelInfo struct {
	ID             string    `json:"id"`
	Language       string    `json:"language"`
	Pid            int       `json:"pid"`
	StartedAt      time.Time `json:"started_at"`
	ExecutionCount int       `json:"execution_count"`
	// Busy is set while an execution runs.
	Busy bool `json:"busy"`
}

// KernelExecRequest runs code in a kernel.
type KernelExecRequest struct {
	Code string `json:"code"`
	// Timeout interrupts the execution when it elapses (0: none; the
	// request context still applies).
	Timeout time.Duration `json:"timeout,omitempty"`
	// OutputLimit caps the bytes of stdout plus stderr delivered; past it
	// output is read and dropped, and a marker says how much (0: no cap).
	OutputLimit int64 `json:"output_limit,omitempty"`
	// Env is set in the interpreter's environment (os.environ,
	// process.env, exported variables) for this execution, and what it
	// replaced is put back after it. Names are non-empty, without '=' or
	// NUL; values without NUL.
	Env map[string]string `json:"env,omitempty"`
}

// Error kinds of a KernelError.
const (
	KindSyntax  = "syntax"
	KindRuntime = "runtime"
	KindSystem  = "system"
)

// KernelError is an execution's error.
type KernelError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
	Kind      string `json:"kind"`
}

// KernelResult is how an execution ended.
type KernelResult struct {
	ExecutionCount int `json:"execution_count"`
	// Result is the MIME bundle of the last expression's value, if any.
	Result map[string]any `json:"result,omitempty"`
	Error  *KernelError   `json:"error,omitempty"`
	// TimedOut says the timeout interrupted the execution.
	TimedOut bool `json:"timed_out,omitempty"`
	// StateLost says the interpreter was restarted during or before this
	// execution: it could not be interrupted, or it had died.
	StateLost bool `json:"state_lost,omitempty"`
	// Dropped counts output bytes past the OutputLimit.
	Dropped  int64         `json:"dropped,omitempty"`
	Duration time.Duration `json:"duration"`
}

// frameDisplay carries one rich output (a JSON MIME bundle) of a kernel
// execution.
const frameDisplay byte = 'd'
