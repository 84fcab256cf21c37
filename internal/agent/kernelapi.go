package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	if req.Timeout < 0 || req.OutputLimit < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", errors.New("timeout and output_limit must not be negative"))
		return
	}
	k, err := s.kernels.get(r.PathValue("id"))
	if err != nil {
		writeKernelError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	s.track(1)
	defer s.track(-1)
	res, err := s.kernels.execute(r.Context(), k, req, fw)
	if err != nil {
		res.Error = &KernelError{Name: "KernelDied", Kind: KindSystem, Value: err.Error()}
	}
	b, _ := json.Marshal(res)
	_ = fw.frame(frameResult, b)
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
	return c.getJSON(ctx, http.MethodDelete, "/v1/kernels/"+url.PathEscape(id), nil, nil)
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
func (c *Client) Execute(ctx context.Context, id string, req KernelExecRequest, out KernelOutput) (KernelResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return KernelResult{}, fmt.Errorf("encode execute request: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/kernels/"+url.PathEscape(id)+"/execute", nil, bytes.NewReader(b))
	if err != nil {
		return KernelResult{}, err
	}
	defer resp.Body.Close()
	var res KernelResult
	err = c.readFrames(ctx, resp.Body, "execute", func(kind byte, p []byte) (bool, error) {
		var err error
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
			if err := json.Unmarshal(p, &res); err != nil {
				return true, fmt.Errorf("decode execute result: %w", err)
			}
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("deliver kernel output: %w", err)
		}
		return false, nil
	})
	return res, err
}

func call(f func([]byte) error, p []byte) error {
	if f == nil {
		return nil
	}
	return f(p)
}
