package e2b

import (
	"context"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Files is what envd's file routes need of the sandbox service.
type Files interface {
	Upload(ctx context.Context, id, path string, mode fs.FileMode, content io.Reader) (*api.FileInfo, error)
	Download(ctx context.Context, id, path string) (io.ReadCloser, int64, error)
}

var _ Files = (*service.Sandboxes)(nil)

// uploadMode is the permission of a file written through /files.
const uploadMode fs.FileMode = 0o644

// serveEnvd serves the in-sandbox daemon's routes of sandbox id: its
// health (which the SDKs' is_running() reads) and the plain file
// transfers. The Connect-RPC process and filesystem services are not
// served yet: they answer the Connect protocol's "unimplemented" (501), so
// that the SDKs raise at once instead of waiting.
func (h *Handler) serveEnvd(w http.ResponseWriter, r *http.Request, id string) {
	p := r.URL.Path
	switch {
	case p == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(p, "/process.Process/"), strings.HasPrefix(p, "/filesystem.Filesystem/"):
		writeJSON(w, http.StatusNotImplemented, connectError{Code: "unimplemented",
			Message: strings.TrimPrefix(p, "/") + " is not supported by agent2env yet"})
	case p == "/files" && h.cfg.Files == nil:
		writeError(w, errdefs.NotImplemented("file transfers are not served by this daemon"))
	case p == "/files" && r.Method == http.MethodGet:
		h.download(w, r, id)
	case p == "/files" && r.Method == http.MethodPost:
		h.upload(w, r, id)
	default:
		writeError(w, errdefs.NotFound("no such route: %s %s", r.Method, p))
	}
}

// connectError is a Connect protocol error body.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// filePath returns the sandbox path a /files request names: relative
// paths are taken from the user's home, as envd does. It refuses a
// username other than E2B's default user, and signed URLs.
func filePath(r *http.Request, p string) (string, error) {
	q := r.URL.Query()
	if u := q.Get("username"); u != "" && u != "user" {
		return "", errdefs.Invalid("username %q: files are read and written as the sandbox's user (E2B's \"user\")", u)
	}
	if q.Get("signature") != "" {
		return "", errdefs.Invalid("signature: signed file URLs are not supported yet; send the access token")
	}
	if p == "" {
		return "", errdefs.Invalid("path is required")
	}
	if !path.IsAbs(p) {
		p = service.HomeDir + "/" + p
	}
	return service.CleanPath(p)
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request, id string) {
	p, err := filePath(r, r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	rc, size, err := h.cfg.Files.Download(r.Context(), id, p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set(headerContentType, "application/octet-stream")
	if size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// entryInfo is envd's EntryInfo of a written file.
type entryInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// upload writes the parts of a multipart body, each to the path query
// parameter when there is one part, or to its file name (the SDK sends
// the path as the name).
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, id string) {
	mt, _, err := mime.ParseMediaType(r.Header.Get(headerContentType))
	if err != nil || mt != "multipart/form-data" {
		writeError(w, errdefs.Invalid("the body must be multipart/form-data (this envd version, %s, takes no octet-stream)", EnvdVersion))
		return
	}
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Metadata-") {
			writeError(w, errdefs.Invalid("%s: file metadata is not supported", k))
			return
		}
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, errdefs.Invalid("multipart body: %v", err))
		return
	}
	queryPath := r.URL.Query().Get("path")
	out := []entryInfo{}
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeError(w, errdefs.Invalid("multipart body: %v", err))
			return
		}
		// Not part.FileName(), which keeps only the last element.
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name := params["filename"]
		if queryPath != "" && n == 0 {
			name = queryPath
		} else if queryPath != "" {
			err = errdefs.Invalid("path names one file; send each file's path as its part's file name instead")
		}
		var p string
		if err == nil {
			p, err = filePath(r, name)
		}
		var fi *api.FileInfo
		if err == nil {
			fi, err = h.cfg.Files.Upload(r.Context(), id, p, uploadMode, part)
		}
		part.Close()
		if err != nil {
			writeError(w, err)
			return
		}
		out = append(out, entryInfo{Name: path.Base(fi.Path), Type: "file", Path: fi.Path})
	}
	if len(out) == 0 {
		writeError(w, errdefs.Invalid("the body holds no file"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}
