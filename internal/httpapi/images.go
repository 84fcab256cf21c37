package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
)

// Images is what the API needs of the image store.
type Images interface {
	List(ctx context.Context) ([]*image.Image, error)
	Pull(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error)
	Build(ctx context.Context, name string, p image.ProgressFunc) (*image.Image, error)
	Import(ctx context.Context, path string, p image.ProgressFunc) ([]*image.Image, error)
	Remove(ctx context.Context, ref string) error
	// CreateTemp creates a file to spool an archive to Import in, where
	// a crash leaves nothing for long: the store empties the directory
	// when it opens.
	CreateTemp(pattern string) (*os.File, error)
}

// maxImportBytes bounds an uploaded image archive.
const maxImportBytes = 16 << 30

func imageToAPI(img *image.Image) api.Image {
	return api.Image{Ref: img.Ref, Digest: img.Digest, ID: img.ID, Size: img.Size, Layers: len(img.Layers), Created: img.Created}
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	imgs, err := s.images.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := api.List[api.Image]{Items: make([]api.Image, 0, len(imgs))}
	for _, img := range imgs {
		out.Items = append(out.Items, imageToAPI(img))
	}
	writeJSON(w, http.StatusOK, out)
}

// progressStream runs op, streaming its progress as SSE "progress" events
// and ending with one "image" event per result or an "error" event.
func (s *Server) progressStream(w http.ResponseWriter, r *http.Request, op func(image.ProgressFunc) ([]*image.Image, error)) {
	events := sse.Start(w)
	imgs, err := op(func(p image.Progress) {
		_ = events.SendJSON("progress", api.ImageProgress{Phase: p.Phase, Item: p.Item, Current: p.Current, Total: p.Total})
	})
	if err != nil {
		events.SendJSON("error", errdefs.Body(err))
		return
	}
	for _, img := range imgs {
		events.SendJSON("image", imageToAPI(img))
	}
}

func (s *Server) decodeImageRef(w http.ResponseWriter, r *http.Request) (string, error) {
	var req api.ImageRequest
	if err := decode(w, r, &req); err != nil {
		return "", err
	}
	if req.Ref == "" {
		return "", errdefs.Invalid("ref is required")
	}
	return req.Ref, nil
}

func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	ref, err := s.decodeImageRef(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.progressStream(w, r, func(p image.ProgressFunc) ([]*image.Image, error) {
		img, err := s.images.Pull(r.Context(), ref, p)
		return []*image.Image{img}, err
	})
}

func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	ref, err := s.decodeImageRef(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.progressStream(w, r, func(p image.ProgressFunc) ([]*image.Image, error) {
		img, err := s.images.Build(r.Context(), ref, p)
		return []*image.Image{img}, err
	})
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
	s.progressStream(w, r, func(p image.ProgressFunc) ([]*image.Image, error) {
		return s.images.Import(r.Context(), f.Name(), p)
	})
}

func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	if err := s.images.Remove(r.Context(), r.PathValue("ref")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
