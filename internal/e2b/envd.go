package e2b

import (
	"compress/gzip"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// uploadMode is the permission of a file written through /files.
const uploadMode fs.FileMode = 0o644

// serveEnvd serves the in-sandbox daemon's routes of sandbox id: its
// health (which the SDKs' is_running() reads), the Connect services
// process.Process and filesystem.Filesystem, and the plain file
// transfers.
func (h *Handler) serveEnvd(w http.ResponseWriter, r *http.Request, id string) {
	p := r.URL.Path
	switch {
	case p == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.WriteHeader(http.StatusNoContent)
	case isRPCPath(p):
		h.rpc.ServeHTTP(w, r.WithContext(withSandbox(r.Context(), id)))
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

// errSignedURL refuses a signed file URL (the SDKs' download_url and
// upload_url), which agent2env does not issue.
var errSignedURL = errdefs.Invalid("signature: signed file URLs are not supported yet; read and write files with the sandbox's access token (files.read, files.write)")

// filePath returns the sandbox path a /files request names, resolved as
// envd does (resolvePath). It refuses a username other than E2B's default
// user, and signed URLs.
func filePath(r *http.Request, p string) (string, error) {
	q := r.URL.Query()
	if u := q.Get("username"); u != "" && u != "user" {
		return "", errdefs.Invalid("username %q: files are read and written as the sandbox's user (E2B's \"user\")", u)
	}
	if q.Has("signature") {
		return "", errSignedURL
	}
	if p == "" {
		return "", errdefs.Invalid("path is required")
	}
	return resolvePath(p)
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

// upload writes the file of an octet-stream body to the path query
// parameter, or the parts of a multipart one, each to that parameter when
// there is one part, or to its file name (the SDK sends the path as the
// name). Either may come gzip-compressed (Content-Encoding).
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, id string) {
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Metadata-") {
			writeError(w, errdefs.Invalid("%s: file metadata is not supported", k))
			return
		}
	}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			writeError(w, errdefs.Invalid("the gzip body: %v", err))
			return
		}
		defer zr.Close()
		r.Body = zr
	default:
		writeError(w, errdefs.Invalid("Content-Encoding %q: want gzip or identity", enc))
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get(headerContentType))
	switch {
	case err == nil && mt == "application/octet-stream":
		h.uploadRaw(w, r, id)
	case err == nil && mt == "multipart/form-data":
		h.uploadParts(w, r, id)
	default:
		writeError(w, errdefs.Invalid("the body must be multipart/form-data or application/octet-stream"))
	}
}

// uploadRaw writes an octet-stream body to the path query parameter.
func (h *Handler) uploadRaw(w http.ResponseWriter, r *http.Request, id string) {
	name := r.URL.Query().Get("path")
	if name == "" {
		writeError(w, errdefs.Invalid("path is required with an application/octet-stream body"))
		return
	}
	p, err := filePath(r, name)
	if err != nil {
		writeError(w, err)
		return
	}
	fi, err := h.cfg.Files.Upload(r.Context(), id, p, uploadMode, r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, []entryInfo{{Name: path.Base(fi.Path), Type: "file", Path: fi.Path}})
}

// uploadParts writes the parts of a multipart body as one change: a body
// refused at any part leaves the sandbox as it was.
func (h *Handler) uploadParts(w http.ResponseWriter, r *http.Request, id string) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, errdefs.Invalid("multipart body: %v", err))
		return
	}
	queryPath := r.URL.Query().Get("path")
	fis, err := h.cfg.Files.UploadFiles(r.Context(), id, func(put service.PutFile) error {
		for n := 0; ; n++ {
			part, err := mr.NextPart()
			if err == io.EOF {
				if n == 0 {
					return errdefs.Invalid("the body holds no file")
				}
				return nil
			}
			if err != nil {
				return errdefs.Invalid("multipart body: %v", err)
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
			if err == nil {
				err = put(p, uploadMode, part)
			}
			part.Close()
			if err != nil {
				return err
			}
		}
	})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]entryInfo, len(fis))
	for i, fi := range fis {
		out[i] = entryInfo{Name: path.Base(fi.Path), Type: "file", Path: fi.Path}
	}
	writeJSON(w, http.StatusOK, out)
}
