package api

import "encoding/json"

// LiteBoxd returns the status LiteBoxd's clients are given for a sandbox
// in status st, one of their enum (pending, running, succeeded, failed,
// terminating, unknown; stopped in their newest versions): st itself,
// but running for StatusPaused, which LiteBoxd does not have. Its
// clients check the field against that enum: a paused sandbox given as
// paused failed the stock Python SDK's get of it, and its list of every
// sandbox (pydantic's "Input should be 'pending', 'running', …").
//
// Running is the truest of LiteBoxd's values for a paused sandbox: its
// status is its Pod's phase, and a Pod whose processes are frozen (the
// cgroup freezer, as docker pause does) is still Running, as Docker
// itself says of a paused container (State.Running with State.Paused).
// The sandbox keeps its processes, memory, files and resources and its
// TTL runs on; it has not ended (succeeded, failed), and it is not
// stopped (LiteBoxd's stopped has no processes and is left by
// POST /start, which a paused sandbox refuses; agent2env gives its own
// stopped sandboxes as succeeded), nor unknown (lost). A LiteBoxd client
// that runs a command in it is answered 409 "sandbox … is paused, not
// running: resume it first".
//
// The precise status travels beside it as state, which agent2env's own
// clients read: the Go client (Sandbox.UnmarshalJSON), the Python SDK,
// the CLI (through the Go client) and the web console.
func (st SandboxStatus) LiteBoxd() SandboxStatus {
	if st == StatusPaused {
		return StatusRunning
	}
	return st
}

// sandboxFields is Sandbox without its JSON methods.
type sandboxFields Sandbox

// sandboxJSON is a Sandbox as the API's JSON has it: its fields in
// their order, Status's LiteBoxd value as status, then Status as state.
type sandboxJSON struct {
	sandboxFields
	State SandboxStatus `json:"state"`
}

func (sb *Sandbox) toJSON() sandboxJSON {
	w := sandboxJSON{sandboxFields(*sb), sb.Status}
	w.Status = sb.Status.LiteBoxd()
	return w
}

// sandbox returns the Sandbox w is: its Status is state, or status
// where there is no state (a LiteBoxd server's answer).
func (w *sandboxJSON) sandbox() Sandbox {
	sb := Sandbox(w.sandboxFields)
	if w.State != "" {
		sb.Status = w.State
	}
	return sb
}

// MarshalJSON writes sb with its status in LiteBoxd's enum (status) and
// as it is (state).
func (sb Sandbox) MarshalJSON() ([]byte, error) { return json.Marshal(sb.toJSON()) }

// UnmarshalJSON reads a sandbox as MarshalJSON writes it, or as LiteBoxd
// does (status alone).
func (sb *Sandbox) UnmarshalJSON(b []byte) error {
	var w sandboxJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*sb = w.sandbox()
	return nil
}

// forkedSandboxJSON is a ForkedSandbox as the API's JSON has it.
type forkedSandboxJSON struct {
	sandboxJSON
	Contexts map[string]string `json:"contexts"`
}

// MarshalJSON writes f as Sandbox.MarshalJSON does, with its Contexts
// (which the method that ForkedSandbox would get from Sandbox leaves
// out).
func (f ForkedSandbox) MarshalJSON() ([]byte, error) {
	return json.Marshal(forkedSandboxJSON{f.Sandbox.toJSON(), f.Contexts})
}

// UnmarshalJSON reads a forked sandbox as MarshalJSON writes it.
func (f *ForkedSandbox) UnmarshalJSON(b []byte) error {
	var w forkedSandboxJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	f.Sandbox, f.Contexts = w.sandbox(), w.Contexts
	return nil
}
