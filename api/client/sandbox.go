package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
)

// SandboxService holds the sandbox endpoints. Use it as Client.Sandbox.
type SandboxService struct {
	c *Client
}

// sandboxPath returns the escaped API path of sandbox id plus suffix.
func sandboxPath(id, suffix string) (string, error) {
	if id == "" {
		return "", invalidf("sandbox id is empty")
	}
	return "/sandboxes/" + url.PathEscape(id) + suffix, nil
}

// Create creates a sandbox. It returns as soon as the daemon has accepted
// it: the status is running or failed when the image was already stored,
// and pending while the image is still being pulled or built; see
// WaitForReady.
func (s *SandboxService) Create(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := s.c.doJSON(ctx, http.MethodPost, "/sandboxes", req, &sb); err != nil {
		return nil, wrapf(err, "create sandbox")
	}
	return &sb, nil
}

// List returns every sandbox, oldest first; ListPage selects and orders
// them.
func (s *SandboxService) List(ctx context.Context) ([]api.Sandbox, error) {
	l, err := s.ListPage(ctx, ListSandboxesOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ListSandboxesOptions selects sandboxes (agent2env additions to the
// list). The zero value selects every sandbox, oldest first.
type ListSandboxesOptions struct {
	// Statuses, when not empty, selects the sandboxes in one of these
	// states (a sandbox's State: api.StatusPaused finds the paused ones,
	// api.StatusRunning not them).
	Statuses []api.SandboxStatus
	// Limit and Cursor ask for one page (Limit 0: every sandbox); the
	// next page's cursor is the list's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default) or
	// api.OrderAsc oldest first, api.OrderDesc newest first.
	Order api.Order
}

// ListPage returns the sandboxes opts selects, oldest first unless
// opts.Order says otherwise: one page when opts.Limit is set.
func (s *SandboxService) ListPage(ctx context.Context, opts ListSandboxesOptions) (*api.SandboxList, error) {
	q := pageQuery(opts.Limit, opts.Cursor, opts.Order)
	for _, st := range opts.Statuses {
		q.Add("status", string(st))
	}
	var out api.SandboxList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/sandboxes", q, nil, &out); err != nil {
		return nil, wrapf(err, "list sandboxes")
	}
	return &out, nil
}

// Get returns one sandbox.
func (s *SandboxService) Get(ctx context.Context, id string) (*api.Sandbox, error) {
	p, err := sandboxPath(id, "")
	if err != nil {
		return nil, wrapf(err, "get sandbox")
	}
	var sb api.Sandbox
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &sb); err != nil {
		return nil, wrapf(err, "get sandbox %s", id)
	}
	return &sb, nil
}

// Delete stops and removes a sandbox.
func (s *SandboxService) Delete(ctx context.Context, id string) error {
	p, err := sandboxPath(id, "")
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodDelete, p, nil, nil)
	}
	if err != nil {
		return wrapf(err, "delete sandbox %s", id)
	}
	return nil
}

// Stop stops a running sandbox, keeping its files: its status becomes
// succeeded until Start. A sandbox that is not running gives ErrConflict.
func (s *SandboxService) Stop(ctx context.Context, id string) error {
	return s.control(ctx, "stop", id)
}

// Start starts a stopped sandbox again with the files it had, running its
// template's startup plan anew. It returns once the daemon has accepted
// the request, with the sandbox pending; see WaitForReady. A sandbox that
// is not stopped gives ErrConflict.
func (s *SandboxService) Start(ctx context.Context, id string) error {
	return s.control(ctx, "start", id)
}

// Restart stops a running sandbox, if it is, and starts it again, as Stop
// and Start do.
func (s *SandboxService) Restart(ctx context.Context, id string) error {
	return s.control(ctx, "restart", id)
}

// control posts a stop, start or restart request. Its answer,
// {"message": "<op> requested"}, says nothing the status does not.
func (s *SandboxService) control(ctx context.Context, op, id string) error {
	p, err := sandboxPath(id, "/"+op)
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodPost, p, nil, nil)
	}
	if err != nil {
		return wrapf(err, "%s sandbox %s", op, id)
	}
	return nil
}

// Pause freezes the processes of a running sandbox where they are, in
// memory, and returns it paused: it uses no CPU until Resume, keeps its
// memory, files and processes, counts against the daemon's capacity, and
// its TTL runs on. Exec and files give ErrConflict meanwhile. A sandbox
// that is not running gives ErrConflict; a runtime that cannot pause (the
// kubernetes runtime) ErrNotImplemented.
func (s *SandboxService) Pause(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.post(ctx, "pause", id)
}

// Resume lets the processes of a paused sandbox run again, where they
// were, and returns it running. A sandbox that is not paused gives
// ErrConflict.
func (s *SandboxService) Resume(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.post(ctx, "resume", id)
}

// post posts a request without a body on sandbox id (pause, resume) and
// returns the sandbox it answers with.
func (s *SandboxService) post(ctx context.Context, op, id string) (*api.Sandbox, error) {
	p, err := sandboxPath(id, "/"+op)
	if err != nil {
		return nil, wrapf(err, "%s sandbox", op)
	}
	var sb api.Sandbox
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, &sb); err != nil {
		return nil, wrapf(err, "%s sandbox %s", op, id)
	}
	return &sb, nil
}

// Execute runs a command in a sandbox and returns its result once it has
// exited. A non-zero exit code is a result, not an error. Stdout and
// Stderr hold the command's output byte for byte, whether or not it is
// UTF-8: unless req.OutputEncoding says otherwise, Execute asks for it in
// base64 and decodes it (Encoding is then empty).
func (s *SandboxService) Execute(ctx context.Context, id string, req api.ExecRequest) (*api.ExecResponse, error) {
	p, err := sandboxPath(id, "/exec")
	if err != nil {
		return nil, wrapf(err, "exec")
	}
	req.OutputEncoding = outputEncoding(req.OutputEncoding)
	var res api.ExecResponse
	if err := s.c.doJSON(ctx, http.MethodPost, p, req, &res); err != nil {
		return nil, wrapf(err, "exec in sandbox %s", id)
	}
	if err := decodeOutput(&res); err != nil {
		return nil, wrapf(err, "exec in sandbox %s", id)
	}
	return &res, nil
}

// outputEncoding is the output encoding the SDK asks for when the caller
// chose none: base64, which carries any bytes. A daemon that predates it
// ignores it and answers text, unmarked.
func outputEncoding(enc string) string {
	if enc == "" {
		return api.OutputBase64
	}
	return enc
}

// decodeOutput turns res's stdout and stderr into their bytes.
func decodeOutput(res *api.ExecResponse) error {
	stdout, err := api.DecodeOutput(res.Stdout, res.Encoding)
	if err != nil {
		return wrapf(err, "stdout")
	}
	stderr, err := api.DecodeOutput(res.Stderr, res.Encoding)
	if err != nil {
		return wrapf(err, "stderr")
	}
	res.Stdout, res.Stderr, res.Encoding = stdout, stderr, ""
	return nil
}

// ExecuteStream runs a command in a sandbox, copying its output to stdout
// and stderr (either may be nil to discard) as it is produced, and returns
// the final "exit" event. Writes to stdout and stderr happen on the
// calling goroutine, one chunk at a time, and carry the command's bytes
// exactly, UTF-8 or not (as Execute, it asks for base64 unless
// req.OutputEncoding says otherwise). A non-zero exit code is a result,
// not an error.
func (s *SandboxService) ExecuteStream(ctx context.Context, id string, req api.ExecRequest, stdout, stderr io.Writer) (*api.ExecEvent, error) {
	p, err := sandboxPath(id, "/exec/stream")
	if err != nil {
		return nil, wrapf(err, "exec")
	}
	req.OutputEncoding = outputEncoding(req.OutputEncoding)
	ev, err := s.execStream(ctx, p, req, stdout, stderr)
	if err != nil {
		return nil, wrapf(err, "exec in sandbox %s", id)
	}
	return ev, nil
}

func (s *SandboxService) execStream(ctx context.Context, p string, req api.ExecRequest, stdout, stderr io.Writer) (*api.ExecEvent, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.send(ctx, http.MethodPost, apiPrefix+p, nil, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("output stream ended without an exit event")
		}
		if err != nil {
			return nil, wrapf(err, "read output stream")
		}
		var out io.Writer
		switch ev.Name {
		case "stdout":
			out = stdout
		case "stderr":
			out = stderr
		case "exit":
			var exit api.ExecEvent
			if err := json.Unmarshal(ev.Data, &exit); err != nil {
				return nil, wrapf(err, "decode exit event")
			}
			return &exit, nil
		case "error":
			return nil, streamError(ev.Data)
		default:
			continue // an event type of a newer daemon
		}
		var chunk api.ExecEvent
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			return nil, wrapf(err, "decode %s event", ev.Name)
		}
		if out == nil {
			continue
		}
		data, err := api.DecodeOutput(chunk.Data, chunk.Encoding)
		if err != nil {
			return nil, wrapf(err, "%s event", ev.Name)
		}
		if _, err := io.WriteString(out, data); err != nil {
			return nil, wrapf(err, "write %s", ev.Name)
		}
	}
}

// GetLogs returns a sandbox's console output and lifecycle events.
func (s *SandboxService) GetLogs(ctx context.Context, id string) (*api.LogsResponse, error) {
	p, err := sandboxPath(id, "/logs")
	if err != nil {
		return nil, wrapf(err, "get logs")
	}
	var logs api.LogsResponse
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &logs); err != nil {
		return nil, wrapf(err, "get logs of sandbox %s", id)
	}
	return &logs, nil
}

// UploadFile writes the contents of r to the file at path in a sandbox,
// creating parent directories. Only mode's permission bits are sent; 0
// leaves the daemon's default (0644). The body is streamed: r is read
// while the request is sent, never held in memory whole. When UploadFile
// returns early with an error, the background copy may read r once more
// before it notices, as with http.Client.Do.
func (s *SandboxService) UploadFile(ctx context.Context, id, filePath string, r io.Reader, mode os.FileMode) (*api.FileInfo, error) {
	p, err := sandboxPath(id, "/files")
	if err != nil {
		return nil, wrapf(err, "upload")
	}
	if filePath == "" {
		return nil, invalidf("upload to sandbox %s: path is empty", id)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeUpload(mw, filePath, r, mode))
	}()
	resp, err := s.c.send(ctx, http.MethodPost, apiPrefix+p, nil, pr, mw.FormDataContentType())
	// Stop the copy if the request ended before reading all of it.
	pr.CloseWithError(errors.New("upload request finished"))
	if err != nil {
		return nil, wrapf(err, "upload %s to sandbox %s", filePath, id)
	}
	defer resp.Body.Close()
	var info api.FileInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, wrapf(err, "upload %s to sandbox %s: decode response", filePath, id)
	}
	return &info, nil
}

// writeUpload writes the multipart body of an upload: the path and mode
// fields come before the file part so the daemon can stream the file
// straight to its destination.
func writeUpload(mw *multipart.Writer, filePath string, r io.Reader, mode os.FileMode) error {
	if err := mw.WriteField("path", filePath); err != nil {
		return err
	}
	if perm := mode.Perm(); perm != 0 {
		if err := mw.WriteField("mode", fmt.Sprintf("%04o", perm)); err != nil {
			return err
		}
	}
	part, err := mw.CreateFormFile("file", path.Base(filePath))
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, r); err != nil {
		return wrapf(err, "read upload source")
	}
	return mw.Close()
}

// DownloadFile returns the contents of the file at path in a sandbox as
// it arrives. The caller must close it.
func (s *SandboxService) DownloadFile(ctx context.Context, id, filePath string) (io.ReadCloser, error) {
	p, err := sandboxPath(id, "/files")
	if err != nil {
		return nil, wrapf(err, "download")
	}
	resp, err := s.c.send(ctx, http.MethodGet, apiPrefix+p, url.Values{"path": {filePath}}, nil, "")
	if err != nil {
		return nil, wrapf(err, "download %s from sandbox %s", filePath, id)
	}
	return resp.Body, nil
}

// DefaultPollInterval is how often WaitForReady polls when given no
// interval.
const DefaultPollInterval = 500 * time.Millisecond

// WaitForReady polls a sandbox until it is running and returns it. When
// the sandbox reaches a status it will not leave for running on its own
// (failed, succeeded, terminating; paused, which only a resume leaves) it
// returns the sandbox and a *SandboxFailedError. pollInterval <= 0 means
// DefaultPollInterval. Bound the wait with ctx: when it ends first, the
// error wraps its cause (context.DeadlineExceeded for a timeout).
func (s *SandboxService) WaitForReady(ctx context.Context, id string, pollInterval time.Duration) (*api.Sandbox, error) {
	if pollInterval <= 0 {
		pollInterval = DefaultPollInterval
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		sb, err := s.Get(ctx, id)
		if err != nil {
			return nil, wrapf(err, "wait for sandbox %s", id)
		}
		switch sb.Status {
		case api.StatusRunning:
			return sb, nil
		case api.StatusFailed, api.StatusSucceeded, api.StatusTerminating, api.StatusPaused:
			return sb, &SandboxFailedError{ID: sb.ID, Status: sb.Status, Reason: sb.Reason}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for sandbox %s (status %s): %w", id, sb.Status, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// StatFile describes the file at filePath in sandbox id, following
// symbolic links; a relative path is relative to its working directory. A
// missing file is ErrNotFound.
func (s *SandboxService) StatFile(ctx context.Context, id, filePath string) (*api.FileInfo, error) {
	p, err := sandboxPath(id, "/files/stat")
	var fi api.FileInfo
	if err == nil {
		err = s.c.doJSONQuery(ctx, http.MethodGet, p, url.Values{"path": {filePath}}, nil, &fi)
	}
	if err != nil {
		return nil, wrapf(err, "stat %s in sandbox %s", filePath, id)
	}
	return &fi, nil
}

// ListFiles describes the entries of the directory at dirPath in sandbox
// id, by name; "" lists its working directory. A missing directory is
// ErrNotFound, a path that is not a directory an invalid-argument error.
func (s *SandboxService) ListFiles(ctx context.Context, id, dirPath string) ([]api.FileInfo, error) {
	p, err := sandboxPath(id, "/files/list")
	var list api.List[api.FileInfo]
	if err == nil {
		err = s.c.doJSONQuery(ctx, http.MethodGet, p, url.Values{"path": {dirPath}}, nil, &list)
	}
	if err != nil {
		return nil, wrapf(err, "list %s in sandbox %s", dirPath, id)
	}
	return list.Items, nil
}
