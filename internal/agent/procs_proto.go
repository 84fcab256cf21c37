package agent

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Output kept for a detached process, in bytes.
const (
	// DefaultProcOutput is what a process keeps when its request names
	// no OutputLimit.
	DefaultProcOutput = 1 << 20
	// MinProcOutput and MaxProcOutput bound a request's OutputLimit.
	MinProcOutput = 1 << 10
	MaxProcOutput = 64 << 20
)

// Default terminal size of a tty process whose request gives none.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// procIDPrefix starts every process id the agent makes; no tag may start
// with it, so that a path names a process by id or by tag unambiguously.
const procIDPrefix = "proc-"

// procTag is what a tag may be. Like every pattern of the agent, it is
// compiled on first use: compiling at init was 3 % of an agent's start.
var procTag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
})

// ProcRequest describes a detached process to start (POST /v1/procs).
type ProcRequest struct {
	// Command is the argv to run. At most one of Command and Shell is
	// set; neither runs the user's login shell, which needs TTY.
	Command []string `json:"command,omitempty"`
	// Shell is a string run with /bin/sh -c.
	Shell string `json:"shell,omitempty"`
	// Env entries (KEY=VALUE) are added to the sandbox environment (and,
	// for a tty, to TERM=xterm-256color).
	Env []string `json:"env,omitempty"`
	// Cwd is the working directory; the sandbox default when empty.
	Cwd string `json:"cwd,omitempty"`
	// Tag is an optional name chosen by the client, unique among the
	// running processes; the process can be named by it wherever by its
	// id. It may not start with "proc-".
	Tag string `json:"tag,omitempty"`
	// TTY runs the process on a pseudo-terminal of Rows x Cols (default
	// 24 x 80), set before it starts: its stdout and stderr are one
	// stream, and it always takes input.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Stdin gives a process without TTY a pipe as its standard input,
	// fed by ProcStdin and attachments; otherwise it reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// OutputLimit is how many bytes of the latest output are kept for
	// readers (DefaultProcOutput when zero).
	OutputLimit int `json:"output_limit,omitempty"`
	// Timeout ends the process, as DELETE does but keeping it listed,
	// when it elapses; zero means none.
	Timeout time.Duration `json:"timeout,omitempty"`
	// FlowControl makes the output wait for the writer attachment, while
	// one is attached, rather than overwrite what it has not read: a
	// writer that reads slowly holds the process back, as a slow terminal
	// does, and misses nothing. Readers and outputs without a writer
	// attached skip what the ring no longer holds, as ever.
	FlowControl bool `json:"flow_control,omitempty"`
	// AwaitWriter, with FlowControl, makes the output wait from the start
	// for the first writer attachment too: a client that starts a process
	// and attaches to it at once (a one-shot terminal) misses nothing it
	// wrote in between.
	AwaitWriter bool `json:"await_writer,omitempty"`
	// EndWithWriter ends the process, as DELETE does, once a writer
	// attachment ends that was not taken over: a one-shot terminal's,
	// whose process must not outlive its client even when its daemon
	// cannot ask for its end (the sandbox was paused then, or the daemon
	// died).
	EndWithWriter bool `json:"end_with_writer,omitempty"`
}

// Validate reports whether the request can be started.
func (r *ProcRequest) Validate() error {
	switch {
	case len(r.Command) == 0 && r.Shell == "" && !r.TTY:
		return errors.New("command is empty (only a tty process runs the login shell by default)")
	case len(r.Command) > 0 && r.Shell != "":
		return errors.New("command and shell are exclusive")
	case len(r.Command) > 0 && r.Command[0] == "":
		return errors.New("command[0] is empty")
	case r.Tag != "" && (!procTag().MatchString(r.Tag) || strings.HasPrefix(r.Tag, procIDPrefix)):
		return fmt.Errorf("tag %q is not 1-64 letters, digits, '.', '_' or '-' (first a letter or digit, not starting with %q)", r.Tag, procIDPrefix)
	case !r.TTY && (r.Rows != 0 || r.Cols != 0):
		return errors.New("rows and cols need tty")
	case r.TTY && r.Stdin:
		return errors.New("stdin is for a process without tty (a tty always takes input)")
	case r.Timeout < 0:
		return errors.New("timeout is negative")
	case r.OutputLimit != 0 && (r.OutputLimit < MinProcOutput || r.OutputLimit > MaxProcOutput):
		return fmt.Errorf("output_limit %d is not between %d and %d", r.OutputLimit, MinProcOutput, MaxProcOutput)
	}
	return nil
}

// ProcInfo describes a detached process.
type ProcInfo struct {
	ID  string `json:"id"`
	Tag string `json:"tag,omitempty"`
	Pid int    `json:"pid"`
	// Command is the argv that was run.
	Command []string `json:"command"`
	TTY     bool     `json:"tty,omitempty"`
	// Rows and Cols are a tty's size.
	Rows    uint16    `json:"rows,omitempty"`
	Cols    uint16    `json:"cols,omitempty"`
	Started time.Time `json:"started"`
	// Running is set until the process has exited; the fields below it
	// tell how it ended once it has.
	Running  bool      `json:"running"`
	Ended    time.Time `json:"ended,omitzero"`
	ExitCode int       `json:"exit_code"`
	// Signal names the signal that killed it (ExitCode is then 128+n).
	Signal string `json:"signal,omitempty"`
	// Reason is ReasonOutOfMemory when the out-of-memory killer ended it.
	Reason string `json:"reason,omitempty"`
	// TimedOut says its Timeout ended it.
	TimedOut bool `json:"timed_out,omitempty"`
	// OutputStart is the offset of the oldest output byte still kept,
	// Output the offset after the newest: everything it has written.
	OutputStart int64 `json:"output_start"`
	Output      int64 `json:"output"`
	// Writer says an attachment holds the process's input.
	Writer bool `json:"writer,omitempty"`
}

// Frame kinds of the process streams, beside frameStdout, frameStderr
// (output; a tty's is all stdout) and frameResult (the ProcInfo that ends
// a stream).
const (
	// frameOffset carries the 8-byte big-endian offset of the next output
	// byte: first in every output stream, and again after output the
	// stream skipped because the ring no longer held it.
	frameOffset byte = 'g'
	// frameTakenOver ends the output to an attachment whose input another
	// one took over; its payload says so in words.
	frameTakenOver byte = 'k'
	// frameStarted carries the ProcInfo of a process started and followed
	// in one exchange (POST /v1/procs?follow=1): the first frame of its
	// stream.
	frameStarted byte = 'p'
	// From the client on an attachment: input bytes, a resize (2-byte
	// big-endian rows then cols), end of input.
	frameStdin  byte = 'i'
	frameResize byte = 'r'
	frameEOF    byte = 'c'
	// frameSuspend, from a writer, says that the end of its attachment
	// that follows is a suspension: it attaches again (a checkpoint of the
	// sandbox), so a process that ends with its writer waits for it.
	frameSuspend byte = 's'
)

// procProtocol is the Upgrade token of GET /v1/procs/{id}/attach.
const procProtocol = "agent2env-proc"

// ErrTakenOver is the end of an attachment whose input another attachment
// took over (ProcAttachment.Wait; with errdefs.ErrFailedPrecondition).
var ErrTakenOver = errors.New("another client took over the process's input")

// parseSignal reads a signal as a name (TERM, SIGTERM) or a number.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("signal %d is out of range", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}
