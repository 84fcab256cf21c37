package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// ExecuteTimeout is how long one /execute may run, in seconds: the code
// interpreter's request carries none of its own (the SDK bounds it
// client-side, 300 s by default), and agent2env's default is 30 s.
const ExecuteTimeout = 300

// defaultContextName labels the context a sandbox's /execute without a
// context_id runs in, one per language, made on first use with its kernel
// in the sandbox user's home, as E2B's.
const defaultContextName = "e2b-default"

// executeRequest is the code interpreter's ExecutionRequest; code is
// required.
type executeRequest struct {
	Code      *string           `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// contextView is the code interpreter's Context.
type contextView struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func contextOf(c *api.Context) contextView {
	return contextView{ID: c.ContextID, Language: c.Language, Cwd: c.WorkingDir}
}

// writeText answers the code interpreter's errors: plain text, as its
// server (FastAPI's PlainTextResponse) does; the SDK shows the body.
func writeText(w http.ResponseWriter, err error) {
	status, _ := errdefs.HTTPStatus(err)
	w.Header().Set(headerContentType, contentTypePlain)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(err.Error()))
}

// serveInterpreter serves the code interpreter's routes of sandbox id.
func (h *Handler) serveInterpreter(w http.ResponseWriter, r *http.Request, id string) {
	p := r.URL.Path
	switch {
	case p == "/health" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, "OK")
		return
	case h.cfg.Contexts == nil:
		writeText(w, errdefs.NotImplemented("the code interpreter is not served by this daemon"))
		return
	}
	switch {
	case p == "/execute" && r.Method == http.MethodPost:
		h.execute(w, r, id)
	case p == "/contexts" && r.Method == http.MethodPost:
		h.createContext(w, r, id)
	case p == "/contexts" && r.Method == http.MethodGet:
		h.listContexts(w, r, id)
	case strings.HasPrefix(p, "/contexts/"):
		rest := strings.TrimPrefix(p, "/contexts/")
		ctxID, op, _ := strings.Cut(rest, "/")
		switch {
		case ctxID != "" && op == "" && r.Method == http.MethodDelete:
			if _, err := h.cfg.Contexts.Delete(r.Context(), id, ctxID); err != nil {
				writeText(w, err)
				return
			}
			writeJSON(w, http.StatusOK, nil)
		case ctxID != "" && op == "restart" && r.Method == http.MethodPost:
			if err := h.cfg.Contexts.Restart(r.Context(), id, ctxID); err != nil {
				writeText(w, err)
				return
			}
			writeJSON(w, http.StatusOK, nil)
		default:
			writeText(w, errdefs.NotFound("no such route: %s %s", r.Method, p))
		}
	default:
		writeText(w, errdefs.NotFound("no such route: %s %s", r.Method, p))
	}
}

// createContextRequest is the code interpreter's CreateContext.
type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// createContext makes a context whose kernel starts in req.Cwd, taken as
// envd takes paths: the sandbox user's home when none is given, where
// E2B's kernels start (relative paths in code, files and commands are
// one).
func (h *Handler) createContext(w http.ResponseWriter, r *http.Request, id string) {
	var req createContextRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		writeText(w, err)
		return
	}
	var c *api.Context
	cwd, err := resolvePath(req.Cwd)
	if err == nil {
		c, err = h.cfg.Contexts.Create(r.Context(), id, api.CreateContextRequest{Language: req.Language, WorkingDir: cwd})
	}
	if err != nil {
		writeText(w, err)
		return
	}
	writeJSON(w, http.StatusOK, contextOf(c))
}

func (h *Handler) listContexts(w http.ResponseWriter, r *http.Request, id string) {
	list, err := h.cfg.Contexts.List(r.Context(), id, "")
	if err != nil {
		writeText(w, err)
		return
	}
	out := make([]contextView, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, contextOf(&list.Items[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) execute(w http.ResponseWriter, r *http.Request, id string) {
	var req executeRequest
	// An empty body is as one without code; no Content-Type is taken as
	// JSON, as the code interpreter's server does.
	err := decodeJSONUpTo(w, r, &req, true, service.MaxCodeBytes+maxBody)
	if err == nil && req.Code == nil {
		err = errdefs.Invalid("code is required")
	}
	if err != nil {
		writeText(w, err)
		return
	}
	code := *req.Code
	var ctxID, language string
	if req.ContextID != nil {
		ctxID = *req.ContextID
	}
	if req.Language != nil {
		language = *req.Language
	}
	switch {
	case ctxID != "" && language != "":
		err = errdefs.Invalid("give context_id or language, not both")
	case ctxID == "":
		if language == "" {
			language = api.LanguagePython
		}
		ctxID, err = h.defaultContext(r.Context(), id, language)
	}
	// serveSandbox's access check has just read the sandbox and found it
	// running: the execution does not read it again.
	var run func(context.Context, service.Sink) (*api.ExecuteResponse, error)
	if err == nil {
		run, err = h.cfg.Contexts.StreamChecked(r.Context(), id, ctxID, api.ExecuteRequest{Code: code, Timeout: ExecuteTimeout, Env: req.EnvVars})
		if errors.Is(err, errdefs.ErrNotFound) && req.ContextID == nil {
			// The remembered default context is gone (deleted through
			// /contexts or agent2env's API): find or make it afresh.
			h.defaults.forget(id + "\x00" + language)
			if ctxID, err = h.defaultContext(r.Context(), id, language); err == nil {
				run, err = h.cfg.Contexts.StreamChecked(r.Context(), id, ctxID, api.ExecuteRequest{Code: code, Timeout: ExecuteTimeout, Env: req.EnvVars})
			}
		}
	}
	if err != nil {
		writeText(w, err)
		return
	}
	w.Header().Set(headerContentType, contentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	s := &ndjsonSink{w: w, now: h.cfg.Now}
	resp, err := run(r.Context(), s)
	switch {
	case err != nil && r.Context().Err() != nil:
		return // the client is gone
	case err != nil:
		_ = s.line(errorLine{Type: "error", Name: "SystemError", Value: err.Error()})
	default:
		if resp.Error != nil {
			_ = s.line(errorLine{Type: "error", Name: resp.Error.Name, Value: resp.Error.Value, Traceback: resp.Error.Traceback})
		}
		_ = s.line(countLine{Type: "number_of_executions", ExecutionCount: resp.ExecutionCount})
	}
	_ = s.line(endLine{Type: "end_of_execution"})
}

// The code interpreter's NDJSON lines.
type (
	outputLine struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		Timestamp string `json:"timestamp"`
	}
	// resultLine is a result: the MIME bundle's fields, which have the
	// code interpreter's names, its type, and is_main_result always (the
	// bundle's own is omitted when false; this one, shallower, wins).
	resultLine struct {
		Type string `json:"type"`
		api.ExecutionResult
		IsMainResult bool `json:"is_main_result"`
	}
	errorLine struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Value     string `json:"value"`
		Traceback string `json:"traceback"`
	}
	countLine struct {
		Type           string `json:"type"`
		ExecutionCount int    `json:"execution_count"`
	}
	endLine struct {
		Type string `json:"type"`
	}
)

// ndjsonSink writes an execution's output as the code interpreter's
// NDJSON lines: what comes while the code runs (output, display results)
// is flushed line by line; the main result, which comes once the code has
// run, and the closing lines (error, count, end) go out together when the
// handler returns, in one write (and with a Content-Length rather than
// chunked when nothing was flushed before: what run_code("1") answers).
type ndjsonSink struct {
	w   http.ResponseWriter
	now func() time.Time
}

// line writes v as a line, unflushed.
func (s *ndjsonSink) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

// flushed writes v as a line and flushes it.
func (s *ndjsonSink) flushed(v any) error {
	if err := s.line(v); err != nil {
		return err
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (s *ndjsonSink) output(kind, text string) error {
	return s.flushed(outputLine{Type: kind, Text: text, Timestamp: s.now().UTC().Format(time.RFC3339Nano)})
}

func (s *ndjsonSink) Stdout(text string) error { return s.output("stdout", text) }
func (s *ndjsonSink) Stderr(text string) error { return s.output("stderr", text) }

// Result writes a result line; a display result (a chart shown while the
// code runs) is flushed, the main result is not (the closing lines follow
// it at once).
func (s *ndjsonSink) Result(r api.ExecutionResult) error {
	line := resultLine{Type: "result", ExecutionResult: r, IsMainResult: r.IsMainResult}
	if r.IsMainResult {
		return s.line(line)
	}
	return s.flushed(line)
}

// defaultContext returns the id of sandbox id's default context of
// language (service.Contexts.Default), remembered after the first call so
// that a run_code does not list the sandbox's contexts each time.
func (h *Handler) defaultContext(ctx context.Context, id, language string) (string, error) {
	key := id + "\x00" + language
	if v, ok := h.defaults.get(key); ok {
		return v, nil
	}
	def, err := h.cfg.Contexts.Default(ctx, id, api.CreateContextRequest{Language: language, Name: defaultContextName, WorkingDir: service.HomeDir})
	if err != nil {
		return "", err
	}
	h.defaults.remember(key, def.ContextID)
	return def.ContextID, nil
}
