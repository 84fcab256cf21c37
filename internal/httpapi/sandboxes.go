package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/store"
)

// maxLogBytes bounds the console output GET /logs returns.
const maxLogBytes = 1 << 20

// toAPI is a sandbox as the API shows it.
func (s *Server) toAPI(sb *store.Sandbox) api.Sandbox {
	out := toAPI(sb)
	if sb.AccessToken != "" {
		out.AccessToken = sb.AccessToken
		if s.publicURL != "" {
			out.AccessURL = s.publicURL + "/api/v1/sandbox/" + sb.ID
		}
	}
	return out
}

func toAPI(sb *store.Sandbox) api.Sandbox {
	expires := api.Never
	if sb.ExpiresAt != nil {
		expires = *sb.ExpiresAt
	}
	return api.Sandbox{
		ID: sb.ID, Image: sb.Image, CPU: sb.CPU, Memory: sb.Memory, TTL: sb.TTL, Env: sb.Env,
		Status: api.SandboxStatus(sb.Status), Template: sb.Template, TemplateVersion: sb.TemplateVersion,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, ExpiresAt: expires, Reason: sb.Reason,
	}
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mreq := manager.CreateRequest{
		Image: req.Image, CPU: req.CPU, Memory: req.Memory, TTL: req.TTL, Env: req.Env,
		Template: req.Template, TemplateVersion: req.TemplateVersion,
	}
	if o := req.Overrides; o != nil {
		if req.Template == "" {
			writeError(w, errdefs.Invalid("overrides apply to templates; with image, give cpu, memory, ttl and env directly"))
			return
		}
		mreq.CPU, mreq.Memory, mreq.TTL, mreq.Env = o.CPU, o.Memory, o.TTL, o.Env
	}
	sb, err := s.mgr.Create(r.Context(), mreq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toAPI(sb))
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	p, err := pageOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	page, next, err := s.mgr.ListPage(r.Context(), p)
	if err != nil {
		writeError(w, err)
		return
	}
	out := api.SandboxList{Items: make([]api.Sandbox, 0, len(page)), NextCursor: next}
	for _, sb := range page {
		out.Items = append(out.Items, s.toAPI(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

// pageOf reads the limit and cursor query parameters: without a limit,
// the whole list.
func pageOf(r *http.Request) (store.Page, error) {
	q := r.URL.Query()
	p := store.Page{After: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxPageSize {
			return p, errdefs.Invalid("limit %q: want a number from 1 to %d", v, api.MaxPageSize)
		}
		p.Limit = n
	}
	return p, nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.mgr.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPI(sb))
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// control answers a stop, start or restart request as LiteBoxd does:
// {"message": "<op> requested"}.
func (s *Server) control(op string, fn func(context.Context, string) (*store.Sandbox, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := fn(r.Context(), r.PathValue("id")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"message": op + " requested"})
	}
}

func execRequest(req *api.ExecRequest) manager.ExecRequest {
	out := manager.ExecRequest{
		Command: req.Command, Timeout: time.Duration(req.Timeout) * time.Second, Env: req.Env, Cwd: req.Cwd,
	}
	if req.Stdin != "" {
		out.Stdin = strings.NewReader(req.Stdin)
	}
	return out
}

func (s *Server) decodeExec(w http.ResponseWriter, r *http.Request) (manager.ExecRequest, error) {
	var req api.ExecRequest
	if err := decode(w, r, &req); err != nil {
		return manager.ExecRequest{}, err
	}
	if req.Timeout < 0 {
		return manager.ExecRequest{}, errdefs.Invalid("timeout %d is negative", req.Timeout)
	}
	// Checked here, in seconds, because converting a larger value to a
	// time.Duration overflows, possibly into the allowed range.
	if maxSecs := int(manager.MaxExecTimeout / time.Second); req.Timeout > maxSecs {
		return manager.ExecRequest{}, errdefs.Invalid("timeout %d is above the maximum of %d seconds", req.Timeout, maxSecs)
	}
	return execRequest(&req), nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	req, err := s.decodeExec(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.mgr.Exec(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer res.Release()
	resp := api.ExecResponse{
		ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		TimedOut: res.TimedOut, Truncated: res.Truncated, DurationMS: ms(res.Duration),
		OOMKilled: res.OOMKilled, Reason: res.Reason,
	}
	writeJSONText(w, http.StatusOK, &resp, &resp.Stdout, &resp.Stderr)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// execStream runs a command and streams its output as Server-Sent Events:
// "stdout" and "stderr" events carry {"data": chunk}, the final "exit"
// event the result; an "error" event ends a stream that failed midway.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request) {
	req, err := s.decodeExec(w, r)
	if err == nil {
		err = s.mgr.ValidateExec(req)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// Fail before the stream starts when the sandbox cannot run anything.
	if _, err := s.mgr.Agent(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	events := sse.Start(w)
	res, err := s.mgr.ExecStream(r.Context(), r.PathValue("id"), req,
		outputWriter(events, "stdout"), outputWriter(events, "stderr"))
	if err != nil {
		events.SendJSON("error", errdefs.Body(err))
		return
	}
	events.SendJSON("exit", api.ExecEvent{Type: "exit", ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: ms(res.Duration),
		OOMKilled: res.OOMKilled, Reason: res.Reason})
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
			b, _ := io.ReadAll(io.LimitReader(part, 16))
			v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 8, 32)
			if err != nil || v > 0o777 {
				writeError(w, errdefs.Invalid("mode %q is not an octal permission", b))
				return
			}
			mode = os.FileMode(v)
		case "file":
			if path == "" {
				if spooled != nil {
					writeError(w, errdefs.Invalid("multipart body has more than one file part"))
					return
				}
				if spooled, err = spool(part); err != nil {
					writeError(w, err)
					return
				}
				continue
			}
			if info, err = s.uploadTo(r, id, path, mode, part); err != nil {
				writeError(w, err)
				return
			}
		}
		part.Close()
	}
	if info == nil && spooled != nil {
		if info, err = s.uploadTo(r, id, path, mode, spooled); err != nil {
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

func (s *Server) uploadTo(r *http.Request, id, path string, mode os.FileMode, body io.Reader) (*api.FileInfo, error) {
	if path == "" {
		return nil, errdefs.Invalid("path is required")
	}
	fi, err := s.mgr.Upload(r.Context(), id, path, mode, body)
	if err != nil {
		return nil, err
	}
	return &api.FileInfo{Name: fi.Name, Path: fi.Path, Size: fi.Size, Mode: fmt.Sprintf("%04o", fi.Mode.Perm()),
		ModTime: fi.ModTime, IsDir: fi.IsDir}, nil
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
	rc, size, err := s.mgr.Download(r.Context(), r.PathValue("id"), p)
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
	logs, events, err := s.mgr.Logs(r.Context(), r.PathValue("id"), maxLogBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LogsResponse{Logs: logs, Events: events})
}

// outputWriter returns an io.Writer whose writes become exec output events
// of the given type. The agent delivers each chunk from one goroutine per
// stream, and the two streams' writes are serialized by the agent client.
func outputWriter(events *sse.Writer, event string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if err := events.SendJSON(event, api.ExecEvent{Type: event, Data: string(p)}); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
