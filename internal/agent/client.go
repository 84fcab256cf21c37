package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Client talks to one sandbox's agent. It keeps a small pool of
// connections; Close releases them. It is safe for concurrent use.
type Client struct {
	hc    *http.Client
	tr    *http.Transport
	token string
	// batches is whether the agent takes batch uploads: unknown until the
	// first one asks (an agent's answer holds for its life).
	batches atomic.Int32
	// explain is what SetExplain was given, or nil.
	explain atomic.Pointer[func() error]
	// execsTaken is set once the agent has taken POST /v1/exec/attach:
	// its agent is not older from then on (a start runs the daemon's).
	execsTaken atomic.Bool
	// kernelsTaken is the same for POST /v1/kernels/{id}/execute/attach.
	kernelsTaken atomic.Bool
	// attached are the attachments a checkpoint suspends: to processes,
	// and the execs' (execStream).
	amu      sync.Mutex
	attached map[suspender]bool
	// held, on amu, is set while a checkpoint holds the attachments
	// (SuspendAttachments), and closed when it lets them go on.
	held chan struct{}
}

// SetExplain gives c the daemon's account of why the agent may be out of
// reach: when an exchange fails on its connection, explain is asked, and
// the error it returns (its sandbox was stopped or deleted meanwhile, say)
// is the exchange's error, in place of one that says only that the
// connection broke. That error must be an ErrUnavailable, as a broken
// connection's is; it may carry a wire code. explain returns nil when it
// knows no reason.
func (c *Client) SetExplain(explain func() error) { c.explain.Store(&explain) }

// lost is the error of an exchange that failed on its connection to the
// agent with err: what failed, with the reason explain gives, or else as
// an ErrUnavailable.
func (c *Client) lost(what string, err error) error {
	if explain := c.explain.Load(); explain != nil {
		if reason := (*explain)(); reason != nil {
			return fmt.Errorf("%s: %w", what, reason)
		}
	}
	return fmt.Errorf("%s: %w: %w", what, errdefs.ErrUnavailable, connError(err))
}

// DialFunc opens a new connection to the agent.
type DialFunc func(ctx context.Context) (net.Conn, error)

// NewClient returns a client that reaches the agent through dial and sends
// token (if not empty) as a bearer token.
func NewClient(dial DialFunc, token string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx)
		},
		MaxIdleConnsPerHost: 8,
		DisableCompression:  true,
		// Only requests that ask for it wait (batch uploads): the agent
		// answers at once whether it takes them.
		ExpectContinueTimeout: 10 * time.Second,
	}
	return &Client{hc: &http.Client{Transport: tr}, tr: tr, token: token}
}

// UnixDialer dials the agent's unix socket at path.
func UnixDialer(path string) DialFunc {
	var d net.Dialer
	return func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}
}

// Close closes idle connections. The client stays usable.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// The host part of every URL is ignored by the dialer.
const base = "http://agent"

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	return c.doWith(ctx, method, path, q, body, nil)
}

// doWith is do with the request's headers h added.
func (c *Client) doWith(ctx context.Context, method, path string, q url.Values, body io.Reader, h http.Header) (*http.Response, error) {
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, h)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.lost("reach agent", err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// connError is err, a failed exchange with the agent, without its
// connection's addresses (the daemon's socket path on the host, a Pod's
// IP address): what failed, and how, is all a client of the daemon hears.
func connError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("%s: %w", op.Op, op.Err)
	}
	return err
}

// ErrOlderAgent is the class of the error of a request the sandbox's
// agent has no route for: the agent is older than the daemon (a sandbox
// that ran on across an upgrade of the daemon), and a start of the
// sandbox runs the daemon's. Its errdefs class is ErrNotImplemented.
var ErrOlderAgent = errors.New("the sandbox's agent is older than this daemon")

// decodeError turns an agent error response into an errdefs class. The
// agent answers every error of its own with an errorBody; a 404 or 405
// without one is its router's: the request's route is unknown to it.
func decodeError(resp *http.Response) error {
	var eb errorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return &Error{Message: fmt.Sprintf("%v and has no %s %s: stop and start the sandbox to run the daemon's",
				ErrOlderAgent, resp.Request.Method, resp.Request.URL.Path), class: errdefs.ErrNotImplemented, older: true}
		}
		eb.Error = fmt.Sprintf("agent answered %s", resp.Status)
	}
	return agentError(resp.StatusCode, eb)
}

// agentError is the error the agent answered with status and eb, with
// its errdefs class.
func agentError(status int, eb errorBody) error {
	class := errdefs.ErrUnavailable
	switch status {
	case http.StatusBadRequest:
		class = errdefs.ErrInvalidArgument
	case http.StatusNotFound:
		class = errdefs.ErrNotFound
	case http.StatusConflict:
		class = errdefs.ErrAlreadyExists
	case http.StatusPreconditionFailed:
		class = errdefs.ErrFailedPrecondition
	case http.StatusForbidden:
		class = errdefs.ErrPermissionDenied
	case http.StatusUnauthorized:
		class = errdefs.ErrUnauthenticated
	case http.StatusInsufficientStorage, http.StatusTooManyRequests:
		class = errdefs.ErrResourceExhausted
	}
	return &Error{Code: eb.Code, Message: eb.Error, class: class}
}

// Error is an error the agent answered with.
type Error struct {
	Code    string // agent error code, e.g. NOT_FOUND, NO_SPACE
	Message string
	class   error
	older   bool // the agent knows no such route (ErrOlderAgent)
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the errdefs class of the error, and ErrOlderAgent for an
// unknown route.
func (e *Error) Unwrap() []error {
	if e.older {
		return []error{e.class, ErrOlderAgent}
	}
	return []error{e.class}
}

func (c *Client) getJSON(ctx context.Context, method, path string, q url.Values, out any) error {
	return c.sendJSON(ctx, method, path, q, nil, out)
}

// sendJSON sends body and decodes the JSON answer into out (nil: none is
// read).
func (c *Client) sendJSON(ctx context.Context, method, path string, q url.Values, body io.Reader, out any) error {
	resp, err := c.do(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode agent response: %w", err)
	}
	return nil
}

// Info returns the agent's heartbeat.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var info Info
	err := c.getJSON(ctx, http.MethodGet, "/v1/info", nil, &info)
	return info, err
}

// Usage returns what the sandbox uses, with the space taken under the
// directories diskDirs (none: DiskBytes is 0).
func (c *Client) Usage(ctx context.Context, diskDirs ...string) (Usage, error) {
	var u Usage
	err := c.getJSON(ctx, http.MethodGet, "/v1/usage", url.Values{"disk": diskDirs}, &u)
	return u, err
}

func write(w io.Writer, p []byte) error {
	if w == nil {
		return nil
	}
	_, err := w.Write(p)
	return err
}

// Download opens the file at path for reading. The caller closes it.
func (c *Client) Download(ctx context.Context, path string) (io.ReadCloser, int64, error) {
	return c.DownloadFrom(ctx, path, 0)
}

// DownloadFrom is Download from byte offset on: the agent reads a regular
// file from there, without sending what is before it. The length is what
// is left from offset (-1 when unknown). An agent older than ranged
// downloads sends the whole file, whose start is then skipped here.
func (c *Client) DownloadFrom(ctx context.Context, path string, offset int64) (io.ReadCloser, int64, error) {
	q := url.Values{"path": {path}}
	if offset > 0 {
		q.Set("offset", strconv.FormatInt(offset, 10))
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/files", q, nil)
	if err != nil {
		return nil, 0, err
	}
	if offset > 0 && resp.Header.Get(HeaderFileOffset) == "" {
		n, err := io.CopyN(io.Discard, resp.Body, offset)
		if err != nil && !errors.Is(err, io.EOF) {
			resp.Body.Close()
			return nil, 0, fmt.Errorf("skip to %d in %s: %w", offset, path, err)
		}
		if resp.ContentLength >= 0 {
			return resp.Body, resp.ContentLength - n, nil
		}
	}
	return resp.Body, resp.ContentLength, nil
}

// Upload writes r to path, creating parent directories. The file appears
// whole or not at all.
func (c *Client) Upload(ctx context.Context, path string, mode os.FileMode, r io.Reader) (FileInfo, error) {
	q := url.Values{"path": {path}, "mode": {strconv.FormatUint(uint64(mode.Perm()), 8)}}
	body, src, stop := cancellableBody(ctx, r)
	defer stop()
	resp, err := c.do(ctx, http.MethodPut, "/v1/files", q, body)
	if err != nil {
		return FileInfo{}, src.readFailed(err)
	}
	defer resp.Body.Close()
	var fi FileInfo
	if err := json.NewDecoder(resp.Body).Decode(&fi); err != nil {
		return FileInfo{}, fmt.Errorf("decode upload result: %w", err)
	}
	return fi, nil
}

// cancellableBody returns a request body reading r, and the function that
// releases it once the request is done. The transport waits for its body
// writer before it gives up on a cancelled request, and that writer may be
// blocked in r.Read for good. Reading r through a pipe that cancellation
// closes frees it. A read of r that fails (a client's body cut short, a
// malformed one) is the caller's error, not the agent's: the request's
// error then says so, as an ErrInvalidArgument (readFailed).
func cancellableBody(ctx context.Context, r io.Reader) (io.Reader, *sourceErr, func()) {
	pr, pw := io.Pipe()
	src := &sourceErr{}
	go func() {
		_, err := io.Copy(pw, readerFunc(func(p []byte) (int, error) {
			n, err := r.Read(p)
			if err != nil && err != io.EOF {
				src.err.Store(&err)
			}
			return n, err
		}))
		pw.CloseWithError(err)
	}()
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	return pr, src, func() {
		stop()
		pr.Close()
	}
}

// sourceErr holds the error a request body's source failed with.
type sourceErr struct{ err atomic.Pointer[error] }

// readFailed returns err, the error of a request whose body src read, as
// the source's own failure when that is what ended the request.
func (src *sourceErr) readFailed(err error) error {
	if e := src.err.Load(); err != nil && e != nil {
		return errdefs.Invalid("read the request's body: %v", *e)
	}
	return err
}

// readerFunc is a function as an io.Reader.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Stat describes path without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	err := c.getJSON(ctx, http.MethodGet, "/v1/stat", url.Values{"path": {path}}, &fi)
	return fi, err
}

// StatTarget describes what path leads to, a final symlink followed. An
// agent from before it describes the link itself (its Link set).
func (c *Client) StatTarget(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	err := c.getJSON(ctx, http.MethodGet, "/v1/stat", url.Values{"path": {path}, "follow": {"1"}}, &fi)
	return fi, err
}

// List describes the entries of the directory at path.
func (c *Client) List(ctx context.Context, path string) ([]FileInfo, error) {
	var out []FileInfo
	err := c.getJSON(ctx, http.MethodGet, "/v1/list", url.Values{"path": {path}}, &out)
	return out, err
}

// Mkdir creates a directory, and its parents when parents is set.
func (c *Client) Mkdir(ctx context.Context, path string, parents bool) error {
	return c.getJSON(ctx, http.MethodPost, "/v1/mkdir", url.Values{"path": {path}, "parents": {strconv.FormatBool(parents)}}, nil)
}

// Remove removes path, and everything below it when recursive is set.
func (c *Client) Remove(ctx context.Context, path string, recursive bool) error {
	return c.getJSON(ctx, http.MethodDelete, "/v1/files", url.Values{"path": {path}, "recursive": {strconv.FormatBool(recursive)}}, nil)
}

// Move renames from to to.
func (c *Client) Move(ctx context.Context, from, to string) error {
	return c.getJSON(ctx, http.MethodPost, "/v1/move", url.Values{"from": {from}, "to": {to}}, nil)
}

// IsNotFound reports whether err says the path does not exist.
func IsNotFound(err error) bool { return errors.Is(err, errdefs.ErrNotFound) }
