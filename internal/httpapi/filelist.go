package httpapi

import (
	"net/http"

	"github.com/agent2env/agent2env/api"
)

// registerFileList serves the listing of a sandbox's directories, which
// LiteBoxd's API lacks and the console's file browser needs.
func (s *Server) registerFileList(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files/list", s.listFiles)
}

// listFiles describes the entries of the directory at query path
// (relative to the working directory; the working directory itself when
// empty), by name. A missing directory is 404, a path that is not a
// directory 400.
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	dir := r.URL.Query().Get("path")
	if dir == "" {
		dir = "."
	}
	fis, err := s.sandboxes.ReadDir(r.Context(), r.PathValue("id"), dir)
	if err != nil {
		writeError(w, err)
		return
	}
	list := api.List[api.FileInfo]{Items: make([]api.FileInfo, len(fis))}
	for i, fi := range fis {
		list.Items[i] = fi.FileInfo
	}
	writeJSON(w, http.StatusOK, list)
}
