package e2b

import (
	"net/http"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// serveEnvd serves the in-sandbox daemon's routes of sandbox id: its
// health (which the SDKs' is_running() reads). The Connect-RPC process
// and filesystem services and the file transfers are not served yet: they
// answer the Connect protocol's "unimplemented" (501), so that the SDKs
// raise at once instead of waiting.
func (h *Handler) serveEnvd(w http.ResponseWriter, r *http.Request, id string) {
	p := r.URL.Path
	switch {
	case p == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(p, "/process.Process/"), strings.HasPrefix(p, "/filesystem.Filesystem/"):
		writeJSON(w, http.StatusNotImplemented, connectError{Code: "unimplemented",
			Message: strings.TrimPrefix(p, "/") + " is not supported by agent2env yet"})
	case p == "/files":
		writeError(w, notImplemented("file transfers through envd are not supported by agent2env yet"))
	default:
		writeError(w, errdefs.NotFound("no such route: %s %s", r.Method, p))
	}
	_ = id
}

// connectError is a Connect protocol error body.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
