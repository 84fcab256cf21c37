package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// handleProcStart starts a detached process and answers its ProcInfo at
// once; with ?follow=1, it answers the process's output stream instead
// (followStarted): the start and the output of a client that reads a
// process to its end, in one exchange.
func (s *Server) handleProcStart(w http.ResponseWriter, r *http.Request) {
	var req ProcRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExecHeader)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode process request: %w", err))
		return
	}
	if err := req.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
		return
	}
	follow, err := strconv.ParseBool(cmp.Or(r.URL.Query().Get("follow"), "0"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("follow: %w", err))
		return
	}
	p, err := s.procs.start(&req, false)
	if err != nil {
		writeProcError(w, err)
		return
	}
	if follow {
		s.followStarted(w, r, p)
		return
	}
	writeJSON(w, http.StatusCreated, p.info())
}

func (s *Server) handleProcList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.procs.list())
}

func (s *Server) handleProcGet(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.lookupProc(w, r); ok {
		writeJSON(w, http.StatusOK, p.info())
	}
}

// handleProcDelete ends a process, if it runs, and forgets it; it answers
// the process's last ProcInfo.
func (s *Server) handleProcDelete(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.lookupProc(w, r); ok {
		writeJSON(w, http.StatusOK, s.procs.remove(p))
	}
}

// handleProcStdin writes the request body to a process's input, and ends
// the input after it with ?eof=1.
func (s *Server) handleProcStdin(w http.ResponseWriter, r *http.Request) {
	s.procControl(w, r, func(p *detachedProc, q url.Values) error {
		eof, err := strconv.ParseBool(cmp.Or(q.Get("eof"), "0"))
		if err != nil {
			return errdefs.Invalid("eof: %v", err)
		}
		err = p.writeStdin(r.Context(), r.Body)
		if err == nil && eof {
			err = p.closeStdin()
		}
		return err
	})
}

// handleProcSignal sends ?signal= (a name or number) to a process's group.
func (s *Server) handleProcSignal(w http.ResponseWriter, r *http.Request) {
	s.procControl(w, r, func(p *detachedProc, q url.Values) error {
		sig, err := parseSignal(q.Get("signal"))
		if err != nil {
			return errdefs.Invalid("%v", err)
		}
		return p.sendSignal(sig)
	})
}

// handleProcResize sets the size of a process's tty (?rows=&cols=).
func (s *Server) handleProcResize(w http.ResponseWriter, r *http.Request) {
	s.procControl(w, r, func(p *detachedProc, q url.Values) error {
		rows, err1 := strconv.ParseUint(q.Get("rows"), 10, 16)
		cols, err2 := strconv.ParseUint(q.Get("cols"), 10, 16)
		if err := errors.Join(err1, err2); err != nil {
			return errdefs.Invalid("rows and cols: %v", err)
		}
		return p.resize(uint16(rows), uint16(cols))
	})
}

// procControl applies act to the process the request's path names, with
// the request's query, and answers 204 when it succeeds.
func (s *Server) procControl(w http.ResponseWriter, r *http.Request, act func(p *detachedProc, q url.Values) error) {
	p, ok := s.lookupProc(w, r)
	if !ok {
		return
	}
	if err := act(p, r.URL.Query()); err != nil {
		writeProcError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// lookupProc returns the process the request's path names, or answers
// that there is none.
func (s *Server) lookupProc(w http.ResponseWriter, r *http.Request) (*detachedProc, bool) {
	p, err := s.procs.get(r.PathValue("id"))
	if err != nil {
		writeProcError(w, err)
		return nil, false
	}
	return p, true
}

// attachQuery reads the options of an output stream or attachment.
func attachQuery(r *http.Request) (since int64, follow, readOnly, takeover bool, err error) {
	q := r.URL.Query()
	since, err = strconv.ParseInt(cmp.Or(q.Get("since"), "0"), 10, 64)
	if err != nil || since < 0 {
		return 0, false, false, false, fmt.Errorf("since %q is not an offset", q.Get("since"))
	}
	var errs [3]error
	for i, b := range []*bool{&follow, &readOnly, &takeover} {
		name := []string{"follow", "readonly", "takeover"}[i]
		if *b, errs[i] = strconv.ParseBool(cmp.Or(q.Get(name), "0")); errs[i] != nil {
			errs[i] = fmt.Errorf("%s: %w", name, errs[i])
		}
	}
	return since, follow, readOnly, takeover, errors.Join(errs[:]...)
}

// writeProcError answers err by its errdefs class, with its code.
func writeProcError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "INTERNAL"
	for _, c := range []struct {
		class  error
		status int
		code   string
	}{
		{errdefs.ErrInvalidArgument, http.StatusBadRequest, "INVALID_REQUEST"},
		{errdefs.ErrNotFound, http.StatusNotFound, "NOT_FOUND"},
		{errdefs.ErrAlreadyExists, http.StatusConflict, "ALREADY_EXISTS"},
		{errdefs.ErrFailedPrecondition, http.StatusPreconditionFailed, "FAILED_PRECONDITION"},
		{errdefs.ErrResourceExhausted, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"},
		{errdefs.ErrUnavailable, http.StatusServiceUnavailable, "UNAVAILABLE"},
	} {
		if errors.Is(err, c.class) {
			status, code = c.status, c.code
			break
		}
	}
	writeError(w, status, cmp.Or(errdefs.Code(err), code), err)
}
