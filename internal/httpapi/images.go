package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// maxImportBytes bounds an uploaded image archive.
const maxImportBytes = 16 << 30

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	imgs, err := s.images.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.List[api.Image]{Items: imgs})
}

// progressStream runs op, streaming its progress as SSE "progress" events
// and ending with one "image" event per result or an "error" event.
func (s *Server) progressStream(w http.ResponseWriter, r *http.Request, op service.ImageOp) {
	events := sse.Start(w)
	imgs, err := op(r.Context(), func(p api.ImageProgress) { _ = events.SendJSON("progress", p) })
	if err != nil {
		events.SendJSON("error", errdefs.Body(err))
		return
	}
	for _, img := range imgs {
		events.SendJSON("image", img)
	}
}

// imageOp decodes the body of a pull or build and starts op on its ref.
func (s *Server) imageOp(op func(ref string) (service.ImageOp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.ImageRequest
		if err := decode(w, r, &req); err != nil {
			writeError(w, err)
			return
		}
		run, err := op(req.Ref)
		if err != nil {
			writeError(w, err)
			return
		}
		s.progressStream(w, r, run)
	}
}

// followImage streams the progress of the pull or build of the query's
// ref in flight, as pull and build do, without starting one.
func (s *Server) followImage(w http.ResponseWriter, r *http.Request) {
	run, err := s.images.Follow(r.URL.Query().Get("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.progressStream(w, r, run)
}

// importImage takes a `docker save` or OCI layout tarball as the raw body.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	f, err := s.images.CreateTemp("import-*.tar")
	if err != nil {
		writeError(w, fmt.Errorf("import image: %w", err))
		return
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, maxImportBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			err = errdefs.Invalid("read image archive: %v", err)
		}
		writeError(w, err)
		return
	}
	s.progressStream(w, r, s.images.Import(f.Name()))
}

func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	if err := s.images.Remove(r.Context(), r.PathValue("ref")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
