package httpapi

import (
	"net/http"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// registerFileList serves the listing of a sandbox's directories, which
// LiteBoxd's API lacks and the console's file browser needs, and the
// description of one file, which a copy into a directory needs.
func (s *Server) registerFileList(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files/list", s.listFiles)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files/stat", s.statFile)
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

// statFile describes the file at query path (relative to the working
// directory), following symbolic links as a download does. A missing file
// (or a link that leads nowhere) is 404.
func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, errdefs.Invalid("path is required"))
		return
	}
	fi, err := s.sandboxes.StatTarget(r.Context(), r.PathValue("id"), p)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fi.FileInfo)
}
