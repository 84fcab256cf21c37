package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// maxKernelRequest bounds a kernel request body (the code).
const maxKernelRequest = 16 << 20

func (s *Server) handleKernelCreate(w http.ResponseWriter, r *http.Request) {
	var spec KernelSpec
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKernelRequest)).Decode(&spec); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode kernel spec: %w", err))
		return
	}
	if err := spec.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
		return
	}
	info, err := s.kernels.create(r.Context(), spec)
	if err != nil {
		writeKernelError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

func (s *Server) handleKernelList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.kernels.list())
}

func (s *Server) handleKernelDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.kernels.remove(r.PathValue("id")); err != nil {
		writeKernelError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleKernelExecute runs code and streams frames: output, displays and
// the result.
func (s *Server) handleKernelExecute(w http.ResponseWriter, r *http.Request) {
	var req KernelExecRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKernelRequest)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode execute request: %w", err))
		return
	}
	k, ok := s.executionKernel(w, r, &req)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	s.track(1)
	defer s.track(-1)
	_ = fw.frame(frameResult, kernelResultFrame(s.kernels.execute(r.Context(), k, req, fw)))
}

// executionKernel checks req, an execution of r's kernel, and returns
// that kernel; it answers the error and returns false when it cannot run.
func (s *Server) executionKernel(w http.ResponseWriter, r *http.Request, req *KernelExecRequest) (*kernel, bool) {
	if req.Timeout < 0 || req.OutputLimit < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", errors.New("timeout and output_limit must not be negative"))
		return nil, false
	}
	k, err := s.kernels.get(r.PathValue("id"))
	if err != nil {
		writeKernelError(w, err)
		return nil, false
	}
	return k, true
}

func writeKernelError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrKernelNotFound):
		writeError(w, http.StatusNotFound, "KERNEL_NOT_FOUND", err)
	case errors.Is(err, ErrKernelExists):
		writeError(w, http.StatusConflict, "ALREADY_EXISTS", err)
	case errors.Is(err, ErrNoInterpreter):
		writeError(w, http.StatusBadRequest, "NO_INTERPRETER", err)
	case errors.As(err, new(*cwdError)):
		writeError(w, http.StatusBadRequest, "INVALID_CWD", err)
	case errors.Is(err, ErrPidsExhausted):
		writeError(w, http.StatusTooManyRequests, "PIDS_EXHAUSTED", err)
	default:
		writeError(w, http.StatusInternalServerError, "KERNEL_FAILED", err)
	}
}

// CreateKernel starts a kernel and returns once it is ready.
func (c *Client) CreateKernel(ctx context.Context, spec KernelSpec) (KernelInfo, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return KernelInfo{}, fmt.Errorf("encode kernel spec: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/kernels", nil, bytes.NewReader(b))
	if err != nil {
		return KernelInfo{}, err
	}
	defer resp.Body.Close()
	var info KernelInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return KernelInfo{}, fmt.Errorf("decode kernel info: %w", err)
	}
	return info, nil
}

// Kernels lists the running kernels.
func (c *Client) Kernels(ctx context.Context) ([]KernelInfo, error) {
	var out []KernelInfo
	err := c.getJSON(ctx, http.MethodGet, "/v1/kernels", nil, &out)
	return out, err
}

// DeleteKernel kills a kernel.
func (c *Client) DeleteKernel(ctx context.Context, id string) error {
	return c.getJSON(ctx, http.MethodDelete, kernelPath(id), nil, nil)
}

// KernelOutput receives an execution's output as it is produced. Any field
// may be nil. Calls come from one goroutine.
type KernelOutput struct {
	Stdout  func([]byte) error
	Stderr  func([]byte) error
	Display func(map[string]any) error
}

// Execute runs code in a kernel, delivering output to out, and returns how
// it ended. Code that fails is not an error: see KernelResult.Error.
// Cancelling ctx interrupts the code.
//
// The execution is one the agent runs apart from the request that starts
// it (POST /v1/kernels/{id}/execute/attach): a checkpoint of the sandbox
// suspends the request as it does an attachment (SuspendAttachments),
// and it attaches again once the checkpoint is done, from the frames it
// has received: its caller sees a pause. An agent older than that runs it
// on one request (POST /v1/kernels/{id}/execute), which a checkpoint
// waits for, and refuses an execution with an env (ErrOlderAgent), which
// it would run without.
func (c *Client) Execute(ctx context.Context, id string, req KernelExecRequest, out KernelOutput) (KernelResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return KernelResult{}, fmt.Errorf("encode execute request: %w", err)
	}
	res, err := c.executeAttached(ctx, id, b, out)
	if !errors.Is(err, ErrOlderAgent) {
		return res, err
	}
	if len(req.Env) > 0 {
		// It would run without them: an older agent knows no env.
		return KernelResult{}, fmt.Errorf("an execution's env: %w", err)
	}
	return c.executeRequest(ctx, id, b, out)
}

// executeRequest runs the execution whose request is req, encoded, on
// one request (POST /v1/kernels/{id}/execute).
func (c *Client) executeRequest(ctx context.Context, id string, req []byte, out KernelOutput) (KernelResult, error) {
	resp, err := c.do(ctx, http.MethodPost, kernelPath(id)+"/execute", nil, bytes.NewReader(req))
	if err != nil {
		return KernelResult{}, err
	}
	defer resp.Body.Close()
	var res KernelResult
	err = c.readFrames(ctx, resp.Body, "execute", func(kind byte, p []byte) (bool, error) {
		return deliverKernelFrame(out, kind, p, &res)
	})
	return res, err
}

// kernelPath is the path of kernel id.
func kernelPath(id string) string { return "/v1/kernels/" + url.PathEscape(id) }

// executeAttached runs the execution whose request is req, encoded, as a
// run of the agent's, attaching to it again after each checkpoint that
// suspends it. It reports ErrOlderAgent when the agent has no such route.
func (c *Client) executeAttached(ctx context.Context, id string, req []byte, out KernelOutput) (KernelResult, error) {
	var (
		res   KernelResult
		run   string // the run's id, once the agent has said it
		since int64  // the frames received
	)
	deliver := func(kind byte, p []byte) (bool, error) {
		if kind == frameStarted && run == "" {
			var info KernelRunInfo
			if err := json.Unmarshal(p, &info); err != nil || info.ID == "" {
				return true, fmt.Errorf("decode the execution's run (%q): %w: %w", p, errdefs.ErrUnavailable, err)
			}
			run = info.ID
			return false, nil
		}
		if kind != frameResult {
			since++
		}
		return deliverKernelFrame(out, kind, p, &res)
	}
	for {
		pr, pw := io.Pipe()
		x := newExecStream(c, pw)
		// Tracked from the start, once no checkpoint holds the
		// attachments: one that comes before the agent has answered
		// lets go of it too.
		if err := c.trackWhenFree(ctx, x); err != nil {
			if run != "" {
				go c.abandonRun(id, run, since)
			}
			return KernelResult{}, err
		}
		path, body, q := kernelPath(id)+"/execute/attach", io.MultiReader(bytes.NewReader(append(req, '\n')), pr), url.Values(nil)
		if run != "" {
			path, body, q = kernelPath(id)+"/executions/"+url.PathEscape(run)+"/attach", pr, url.Values{"since": {strconv.FormatInt(since, 10)}}
		}
		// Until one is taken, the first asks whether the agent takes it
		// before it sends the body: an older agent answers 404 without
		// reading it, which it would otherwise send only once the body
		// has ended.
		var h http.Header
		if !c.kernelsTaken.Load() {
			h = http.Header{"Expect": {"100-continue"}}
		}
		// The end of ctx ends the body, which the request may still be
		// sending when it ends (the agent answers with its first frame).
		stop := context.AfterFunc(ctx, func() { x.end(ctx.Err()) })
		resp, err := c.doWith(ctx, http.MethodPost, path, q, body, h)
		if err != nil {
			stop()
			c.track(x, false)
			x.end(err)
			if run != "" && ctx.Err() != nil {
				go c.abandonRun(id, run, since)
			}
			return KernelResult{}, err
		}
		c.kernelsTaken.Store(true)
		err = c.readFrames(ctx, resp.Body, "execute", deliver)
		stop()
		c.track(x, false)
		if err == nil {
			x.end(nil)
			// The agent ends its answer once the body has ended: the
			// connection goes back to the pool then, the caller not
			// waiting.
			go func() {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
			return res, nil
		}
		resp.Body.Close()
		if run == "" || !x.isSuspended() {
			x.end(err)
			return KernelResult{}, err
		}
		x.end(nil)
	}
}

// abandonRun interrupts run of kernel id, whose client left while a
// checkpoint had it suspended, once the checkpoint is done: it attaches
// and ends its attachment at once, without a suspension.
func (c *Client) abandonRun(id, run string, since int64) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonedKillWait)
	defer cancel()
	if c.trackWhenFree(ctx, nil) != nil {
		return
	}
	q := url.Values{"since": {strconv.FormatInt(since, 10)}}
	resp, err := c.do(ctx, http.MethodPost, kernelPath(id)+"/executions/"+url.PathEscape(run)+"/attach", q, http.NoBody)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// deliverKernelFrame hands one frame of an execution to out, or decodes
// its result into res (the last frame).
func deliverKernelFrame(out KernelOutput, kind byte, p []byte, res *KernelResult) (last bool, err error) {
	switch kind {
	case frameStdout:
		err = call(out.Stdout, p)
	case frameStderr:
		err = call(out.Stderr, p)
	case frameDisplay:
		if out.Display != nil {
			var data map[string]any
			if err = json.Unmarshal(p, &data); err == nil {
				err = out.Display(data)
			}
		}
	case frameResult:
		if err := json.Unmarshal(p, res); err != nil {
			return true, fmt.Errorf("decode execute result: %w", err)
		}
		return true, nil
	}
	if err != nil {
		return true, fmt.Errorf("deliver kernel output: %w", err)
	}
	return false, nil
}

func call(f func([]byte) error, p []byte) error {
	if f == nil {
		return nil
	}
	return f(p)
}
