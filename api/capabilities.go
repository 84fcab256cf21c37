package api

// Capabilities is the answer of GET /api/v1/capabilities (agent2env
// addition): what the daemon's runtime can do where runtimes differ, so
// that a client offers only what works. What it cannot do is refused with
// 501 NOT_IMPLEMENTED, naming why.
type Capabilities struct {
	// Runtime is the runtime's name: oci, kubernetes.
	Runtime string `json:"runtime"`
	// Pause: sandboxes can be paused and resumed (POST
	// /sandboxes/{id}/pause, /resume).
	Pause bool `json:"pause"`
	// Snapshots: sandboxes can be snapshotted and made from snapshots
	// (POST /sandboxes/{id}/snapshots, from_snapshot): the oci runtime
	// with a working criu.
	Snapshots bool `json:"snapshots"`
}
