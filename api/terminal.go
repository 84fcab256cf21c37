package api

import "time"

// TerminalRequest is an interactive process for GET
// /sandboxes/{id}/exec/interactive (its query: command repeated, tty,
// rows, cols, cwd, env as KEY=VALUE repeated).
type TerminalRequest struct {
	// Command is the argv; empty runs the sandbox user's login shell,
	// which needs TTY.
	Command []string `json:"command,omitempty"`
	// TTY runs the command on a pseudo-terminal of Rows x Cols (24 x 80
	// when zero), with TERM=xterm-256color; its stdout and stderr are then
	// one stream.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Cwd  string `json:"cwd,omitempty"`
	// Env entries are added to the sandbox's environment.
	Env map[string]string `json:"env,omitempty"`
}

// TerminalExit is how a terminal's process ended.
type TerminalExit struct {
	// ExitCode is the process's exit status; 128+n when signal n ended it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended it, if one did.
	Signal string `json:"signal,omitempty"`
	// Reason is ExecOutOfMemory when the out-of-memory killer ended it.
	Reason string `json:"reason,omitempty"`
}

// Subprotocols of the terminal endpoint's WebSocket.
const (
	// TerminalProtocolK8s is Kubernetes' exec protocol (version 5): each
	// binary message starts with its stream (TerminalStream*).
	TerminalProtocolK8s = "v5.channel.k8s.io"
	// TerminalAuthProtocolPrefix starts a subprotocol entry that carries
	// the API key, base64url-encoded without padding, for clients that
	// cannot set headers (browsers). The server never selects it.
	TerminalAuthProtocolPrefix = "base64url.bearer.authorization.k8s.io."
)

// Streams of TerminalProtocolK8s: the first byte of each message.
const (
	TerminalStreamStdin  byte = 0
	TerminalStreamStdout byte = 1
	TerminalStreamStderr byte = 2
	// TerminalStreamError carries the exit status once, a Kubernetes
	// metav1.Status: {"status":"Success"}, or "Failure" with reason
	// "NonZeroExitCode" and a cause of type "ExitCode" whose message is
	// the code.
	TerminalStreamError byte = 3
	// TerminalStreamResize carries {"Width":cols,"Height":rows}.
	TerminalStreamResize byte = 4
	// TerminalStreamClose, followed by a stream's byte, closes that
	// stream: [255, 0] ends the process's input.
	TerminalStreamClose byte = 255
)

// TerminalTicket is the answer of POST
// /sandboxes/{id}/exec/interactive/ticket: a one-time credential for a
// browser's WebSocket to that sandbox's terminal, sent as ?ticket= in
// place of an API key.
type TerminalTicket struct {
	// Ticket is 32 random bytes in unpadded base64url.
	Ticket string `json:"ticket"`
	// ExpiresAt is when the ticket, if unused, stops being valid.
	ExpiresAt time.Time `json:"expires_at"`
}

// CreateTerminalRequest is the body of POST /sandboxes/{id}/terminals: a
// persistent terminal, a tty process the sandbox's agent holds between
// connections (and across a restart of the daemon), with the last 1 MiB
// of its output kept for clients that attach again.
type CreateTerminalRequest struct {
	// Name names it in its sandbox: 1-55 letters, digits, '.', '_' or
	// '-', first a letter or digit. Empty: the daemon makes one up.
	Name string `json:"name,omitempty"`
	// Command is the argv; empty runs the sandbox user's login shell.
	Command []string `json:"command,omitempty"`
	// Rows and Cols are the terminal's size (24 x 80 when zero).
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Cwd  string `json:"cwd,omitempty"`
	// Env entries are added to the sandbox's environment.
	Env map[string]string `json:"env,omitempty"`
}

// TerminalInfo describes a persistent terminal.
type TerminalInfo struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	Rows    uint16   `json:"rows"`
	Cols    uint16   `json:"cols"`
	// Running is set until its process has exited; Exit then says how.
	Running   bool          `json:"running"`
	Exit      *TerminalExit `json:"exit,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	EndedAt   *time.Time    `json:"ended_at,omitempty"`
	// OutputStart is the offset of the oldest output byte still kept,
	// Output the offset after the newest: an attachment's since is
	// between them (older output is gone).
	OutputStart int64 `json:"output_start"`
	Output      int64 `json:"output"`
	// Writer says a client is attached as its writer.
	Writer bool `json:"writer"`
}

// TerminalList is the answer of GET /sandboxes/{id}/terminals.
type TerminalList struct {
	Items []TerminalInfo `json:"items"`
}

// TerminalStreamOffset is an agent2env addition to TerminalProtocolK8s,
// sent on a persistent terminal's attachment only: its payload is the
// decimal offset, in the terminal's output, of the next stdout byte. It
// comes first, and again wherever output was skipped (no longer kept), so
// that a client counting the bytes it received knows the since to attach
// again with.
const TerminalStreamOffset byte = 5

// CodeTerminalTakenOver is the code of the error that ends an attachment
// whose place as writer another client took over (attach with
// takeover=true); in TerminalProtocolK8s a Failure status of that reason.
const CodeTerminalTakenOver = "TERMINAL_TAKEN_OVER"
