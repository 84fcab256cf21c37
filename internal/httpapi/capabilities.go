package httpapi

import "net/http"

// capabilities answers what the runtime can do where runtimes differ
// (api.Capabilities), for clients such as the console to offer only that.
func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.sandboxes.Capabilities())
}
