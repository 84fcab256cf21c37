// Package agent is the in-sandbox agent: the process that runs as PID 1 in
// every sandbox and serves the daemon, and the Client the daemon uses to
// reach it.
//
// The protocol is HTTP/1.1 over a private channel: a listening unix socket
// that the runtime creates on the host and hands to the agent as an
// inherited file descriptor (oci), or a TCP port guarded by a bearer token
// and TLS (kubernetes). The socket never appears inside the sandbox, so user
// code can neither reach nor impersonate the agent.
//
// Exec is one full-duplex request (POST /v1/exec/attach): the request body
// is a JSON line with the ExecRequest followed by input frames (kind byte,
// 4-byte big-endian length, payload: stdin, its end, a suspension); the
// response body is frames too, the id of the detached process (below) that
// runs the command, its stdout and stderr with their offsets, and how it
// ended. The exec is that process's writer attachment, so a checkpoint
// suspends it and it attaches again from its offset (exec_client.go). A
// timeout or the client's going ends everything the command started: its
// tree, the groups and sessions it made, the orphans only it can have made
// (proctree.go). POST /v1/exec starts the sandbox's main process (an older
// agent ran every command there, the raw stdin after the line).
//
// Besides exec the agent serves files (a batch upload, /v1/files/batch,
// puts several in place together or none of them: batch.go), watches of
// directories (/v1/watch:
// inotify, as the sandbox's user; watch.go), usage (its cgroup's counters
// and the size of the writable directories), kernels and two upgrades that
// turn a request into a byte pipe: /v1/dial to a port inside the sandbox
// (the port gateway) and /v1/accept, one connection a command made to an
// address the agent listens on for the daemon (the kubernetes runtime's
// services and egress). As PID 1 it reaps every orphan (reaper.go) and,
// where it runs as its commands' user, ignores the signals they can send
// it (init.go). It forwards the sandbox's loopback ports to the daemon's
// egress proxy (EgressAddr) and services (ServicesAddr) on sockets the
// runtime mounts.
//
// Kernels (code-interpreter contexts) are driver scripts in kernels/
// (python, node, bash; embedded) that the agent starts as the sandbox
// user: requests go in on fd 3, control messages (display, done) come out
// on fd 4, and user output stays on fds 1 and 2 so that subprocess and
// C-level output is captured too; a random per-execution marker written to
// both tells where an execution's output ends. A timeout sends SIGINT to
// the kernel's process group, then kills the processes that execution
// started; a kernel that does not stop within two seconds, or dies, is
// restarted and the execution says its state was lost (kernel.go). An
// execution runs apart from the request that starts it, which attaches
// to it, so that a checkpoint suspends it as it does an exec
// (kernel_attach.go).
//
// Detached processes (/v1/procs) are what terminals, background commands
// and process APIs are built on: a process started as exec starts a
// command (same user, limits, out-of-memory score, reaper) that outlives
// the request, on a pseudo-terminal (creack/pty; its size set before it
// starts) or on pipes, optionally with a client-chosen tag and a
// timeout. Its output goes into a ring of its latest bytes (1 MiB by
// default) addressed by absolute offsets, one ring for both streams whose
// records keep stdout and stderr apart (procs_ring.go): readers, as many
// as come, read from an offset with or without following (GET
// .../output), and one that asks for what the ring no longer holds, or
// falls behind, is told the offset it resumes at; no reader makes the
// agent hold more. Input, signals (to its process group) and resizes are
// requests of their own, or frames on an attachment: an upgraded
// connection (like /v1/dial) carrying the output one way and input the
// other, whose input is taken from one writer at a time, another taking
// over only when it asks to. DELETE, a timeout and the agent's end kill
// the process and all it started (proctree.go); its status (128+n for a
// signal) stays readable until DELETE (procs.go).
package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

// Version is the protocol version the agent reports in Info.
const Version = "1"

// Environment variables the runtime uses to configure the agent.
const (
	EnvListenFD = "AGENT2ENV_AGENT_FD"       // inherited listening socket fd
	EnvListen   = "AGENT2ENV_AGENT_LISTEN"   // TCP address to listen on
	EnvToken    = "AGENT2ENV_AGENT_TOKEN"    // bearer token required on TCP
	EnvTLSCert  = "AGENT2ENV_AGENT_TLS_CERT" // PEM: serve TLS on TCP with it
	EnvTLSKey   = "AGENT2ENV_AGENT_TLS_KEY"  // PEM: its key
)

// ExecRequest describes one command to run in the sandbox.
type ExecRequest struct {
	// Command is the argv to run. Exactly one of Command and Shell is set.
	Command []string `json:"command,omitempty"`
	// Shell is a string run with /bin/sh -c.
	Shell string `json:"shell,omitempty"`
	// Env entries (KEY=VALUE) are added to the sandbox environment.
	Env []string `json:"env,omitempty"`
	// Cwd is the working directory; the sandbox default when empty.
	Cwd string `json:"cwd,omitempty"`
	// Stdin says the request body after the JSON line is the command's
	// standard input; otherwise stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// Timeout kills the command's whole process group when it elapses.
	// Zero means no timeout (the request context still applies).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Main starts the command as the sandbox's main process: in the
	// background, with its output going to the sandbox's console log, and
	// its exit reported by Info. The request returns once it has started.
	Main bool `json:"main,omitempty"`
}

// Validate reports whether the request can be run.
func (r *ExecRequest) Validate() error {
	switch {
	case len(r.Command) == 0 && r.Shell == "":
		return fmt.Errorf("command is empty")
	case len(r.Command) > 0 && r.Shell != "":
		return fmt.Errorf("command and shell are exclusive")
	case len(r.Command) > 0 && r.Command[0] == "":
		return fmt.Errorf("command[0] is empty")
	case r.Timeout < 0:
		return fmt.Errorf("timeout is negative")
	case r.Main && (r.Stdin || r.Timeout != 0):
		return fmt.Errorf("a main process takes no stdin and no timeout")
	}
	return nil
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int `json:"exit_code"`
	// Signal is set when the process was killed by a signal.
	Signal string `json:"signal,omitempty"`
	// TimedOut is set when the timeout killed the process group.
	TimedOut bool `json:"timed_out,omitempty"`
	// Error is set when the command could not be started at all
	// (ExitCode is then 127 for not found, 126 otherwise); the agent also
	// writes it to stderr.
	Error string `json:"error,omitempty"`
	// Reason names a cause beyond the command's own doing:
	// ReasonOutOfMemory, ReasonPidsExhausted.
	Reason string `json:"reason,omitempty"`
	// OOMKilled says the out-of-memory killer ended the command (the
	// agent also says so on stderr).
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Duration is the wall time from start to exit.
	Duration time.Duration `json:"duration"`
	// Pid is set for a main process, which is still running.
	Pid int `json:"pid,omitempty"`
}

// Reasons of an ExecResult, and names of a kernel's system errors.
const (
	// ReasonOutOfMemory: the out-of-memory killer ended it (the sandbox
	// reached its memory limit).
	ReasonOutOfMemory = "OutOfMemory"
	// ReasonPidsExhausted: it could not start because the sandbox has
	// reached its process limit.
	ReasonPidsExhausted = "PidsExhausted"
)

// Info is the agent's heartbeat.
type Info struct {
	Version string        `json:"version"`
	Uptime  time.Duration `json:"uptime"`
	// Processes is the number of processes in the sandbox, agent included.
	Processes int `json:"processes"`
	// Running is the number of commands the agent is running for clients.
	Running int `json:"running"`
	// Main is the sandbox's main process, when one was started.
	Main *MainStatus `json:"main,omitempty"`
}

// MainStatus reports on the sandbox's main process.
type MainStatus struct {
	Pid      int    `json:"pid"`
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
}

// FileInfo describes a file in the sandbox.
type FileInfo struct {
	Name    string      `json:"name"`
	Path    string      `json:"path"`
	Size    int64       `json:"size"`
	Mode    os.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
	IsDir   bool        `json:"is_dir"`
	Link    string      `json:"link,omitempty"`
	// UID and GID own the file.
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// errorBody is the JSON body of every agent error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Frame kinds of the exec response stream.
const (
	frameStdout byte = 'o'
	frameStderr byte = 'e'
	frameResult byte = 'x'
)

// maxFrame bounds a frame's payload so a corrupt stream cannot make the
// reader allocate without limit.
const maxFrame = 16 << 20

func writeFrame(w io.Writer, kind byte, p []byte) error {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

// readFrame reads one frame into buf (grown as needed) and returns its kind
// and payload.
func readFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds limit", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, fmt.Errorf("read frame: %w", io.ErrUnexpectedEOF)
	}
	return hdr[0], buf, nil
}

// readFrames reads a response's frames, handing each to on (its payload
// is valid only during the call) until on reports the last one or fails.
// what names the stream in errors.
func (c *Client) readFrames(ctx context.Context, body io.Reader, what string, on func(kind byte, p []byte) (last bool, err error)) error {
	r := bufio.NewReaderSize(body, 64<<10)
	var buf []byte
	for {
		kind, p, err := readFrame(r, buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return c.lost(what+" stream ended before the result", err)
		}
		buf = p[:0]
		if last, err := on(kind, p); last || err != nil {
			return err
		}
	}
}
