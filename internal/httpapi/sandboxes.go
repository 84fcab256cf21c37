package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.sandboxes.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sb)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	opts, err := listOptions(r)
	if err == nil {
		opts.Statuses, err = statusParam(r, sandboxStatuses)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.sandboxes.List(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// listOptions reads the limit, cursor and order query parameters.
func listOptions(r *http.Request) (service.ListOptions, error) {
	q := r.URL.Query()
	opts := service.ListOptions{Cursor: q.Get("cursor"), Order: api.Order(q.Get("order"))}
	var err error
	opts.Limit, err = limitParam(r)
	return opts, err
}

// sandboxStatuses are the statuses the status parameter of the sandbox
// list takes.
var sandboxStatuses = []api.SandboxStatus{api.StatusPending, api.StatusRunning, api.StatusPaused, api.StatusSucceeded,
	api.StatusFailed, api.StatusTerminating, api.StatusUnknown}

// limitParam reads the limit query parameter; nil when there is none.
func limitParam(r *http.Request) (*int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, errdefs.Invalid("limit %q: want a number from 1 to %d", v, api.MaxPageSize)
	}
	return &n, nil
}

// statusParam reads the status query parameter: statuses separated by
// commas, or the parameter repeated; each one of known.
func statusParam[S ~string](r *http.Request, known []S) ([]S, error) {
	return listParam(r, "status", known)
}

// listParam reads the query parameter name: values separated by commas,
// or the parameter repeated, each once; each one of known, or any but
// empty when known is nil.
func listParam[S ~string](r *http.Request, name string, known []S) ([]S, error) {
	var out []S
	for _, v := range r.URL.Query()[name] {
		for _, item := range strings.Split(v, ",") {
			value := S(strings.TrimSpace(item))
			if known != nil && !slices.Contains(known, value) {
				return nil, errdefs.Invalid("%s %q: want one of %s", name, item, joinStrings(known))
			}
			if value == "" {
				return nil, errdefs.Invalid("%s %q: want a name, or names separated by commas", name, v)
			}
			if !slices.Contains(out, value) {
				out = append(out, value)
			}
		}
	}
	return out, nil
}

func joinStrings[S ~string](list []S) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.sandboxes.Describe(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.sandboxes.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// control answers a stop, start or restart request as LiteBoxd does:
// {"message": "<op> requested"}.
func (s *Server) control(op string, fn func(context.Context, string) (*api.Sandbox, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := fn(r.Context(), r.PathValue("id")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"message": op + " requested"})
	}
}

// sandboxOp answers a request on one sandbox that has no body (pause,
// resume) with the sandbox as it then is.
func (s *Server) sandboxOp(fn func(context.Context, string) (*api.Sandbox, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb, err := fn(r.Context(), r.PathValue("id"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, sb)
	}
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, release, err := s.sandboxes.Exec(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	writeExecJSON(w, res, res, req.OutputEncoding)
}

// execStream runs a command and streams its output as Server-Sent Events:
// "stdout" and "stderr" events carry {"data": chunk}, the final "exit"
// event the result; an "error" event ends a stream that failed midway.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	var events *sse.Writer
	exit, err := s.sandboxes.ExecStream(r.Context(), r.PathValue("id"), req,
		func() { events = sse.Start(w) },
		func(ev api.ExecEvent) error { return events.SendJSON(ev.Type, ev) })
	switch {
	case events == nil:
		writeError(w, err)
	case err != nil:
		events.SendJSON("error", errdefs.Body(err))
	default:
		events.SendJSON("exit", exit)
	}
}

// upload accepts multipart/form-data with a "path" field and a "file" part
// and streams the file into the sandbox without holding it in memory. The
// path may also be given as a query parameter; when the file part comes
// before the path field it is spooled to a temporary file first.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, errdefs.Invalid("upload must be multipart/form-data with fields path and file: %v", err))
		return
	}
	path := r.URL.Query().Get("path")
	mode := os.FileMode(0o644)
	var spooled *os.File
	defer func() {
		if spooled != nil {
			spooled.Close()
			os.Remove(spooled.Name())
		}
	}()
	var info *api.FileInfo
	for info == nil {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, errdefs.Invalid("read multipart body: %v", err))
			return
		}
		switch part.FormName() {
		case "path":
			b, err := io.ReadAll(io.LimitReader(part, 4097))
			if err != nil || len(b) > 4096 {
				writeError(w, errdefs.Invalid("path field is unreadable or longer than 4096 bytes"))
				return
			}
			path = string(b)
		case "mode":
			// One byte past the bound: a longer value is refused, not cut
			// to what parses ("0000000000000000644" to 0).
			b, _ := io.ReadAll(io.LimitReader(part, 17))
			v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 8, 32)
			if err != nil || v > 0o777 || len(b) > 16 {
				writeError(w, errdefs.Invalid("mode %.16q is not an octal permission", b))
				return
			}
			mode = os.FileMode(v)
		case "file":
			if spooled != nil {
				// A second file, before or after the path: which one was
				// meant is not for the daemon to guess.
				writeError(w, errdefs.Invalid("multipart body has more than one file part"))
				return
			}
			if path == "" {
				if spooled, err = spool(part); err != nil {
					writeError(w, err)
					return
				}
				continue
			}
			if info, err = s.sandboxes.Upload(r.Context(), id, path, mode, &streamedPart{part: part, rest: mr}); err != nil {
				writeError(w, err)
				return
			}
		}
		part.Close()
	}
	if info == nil && spooled != nil {
		if info, err = s.sandboxes.Upload(r.Context(), id, path, mode, spooled); err != nil {
			writeError(w, err)
			return
		}
	}
	if info == nil {
		writeError(w, errdefs.Invalid("multipart body has no file part"))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// streamedPart is a file part streamed into the sandbox as it comes. At
// its end it reads the parts that follow before it ends too (the upload
// is put in place then): a path, mode or file part after the file would
// have the request ask for other than what was written, so it fails the
// read, and the sandbox keeps nothing of the file, instead of being left
// out. Other parts are read and dropped, as before the file.
type streamedPart struct {
	part    *multipart.Part
	rest    *multipart.Reader
	checked bool
}

func (p *streamedPart) Read(b []byte) (int, error) {
	n, err := p.part.Read(b)
	if errors.Is(err, io.EOF) && !p.checked {
		p.checked = true
		if rerr := checkRest(p.rest); rerr != nil {
			return n, rerr
		}
	}
	return n, err
}

// checkRest reads the parts of mr after a streamed file part, refusing a
// path, mode or file part.
func checkRest(mr *multipart.Reader) error {
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read multipart body: %w", err)
		}
		switch name := part.FormName(); name {
		case "path", "mode", "file":
			return fmt.Errorf("a %s part follows the file part: send path and mode before the file, and one file", name)
		}
		if _, err := io.Copy(io.Discard, part); err != nil {
			return fmt.Errorf("read multipart body: %w", err)
		}
	}
}

// maxSpoolBytes bounds a file part sent before its path, which must be
// held on the host until the path arrives. Send the path first (as every
// client library does) to stream any size straight into the sandbox.
var maxSpoolBytes int64 = 256 << 20

// spool copies r to a temporary file and rewinds it.
func spool(r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "agent2env-upload-*")
	if err != nil {
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	// The spool is on the host's disk, not the sandbox's: bound it.
	n, err := io.Copy(f, io.LimitReader(r, maxSpoolBytes+1))
	if err == nil && n > maxSpoolBytes {
		err = &http.MaxBytesError{Limit: maxSpoolBytes}
	} else if err != nil {
		err = errdefs.Invalid("read file part: %v", err)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	return f, nil
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	rc, size, err := s.sandboxes.Download(r.Context(), r.PathValue("id"), p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	name := p[strings.LastIndex(p, "/")+1:]
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	if size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	logs, err := s.sandboxes.Logs(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, logs)
}
