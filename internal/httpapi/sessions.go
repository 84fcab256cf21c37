package httpapi

import (
	"errors"
	"net/http"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
)

// SessionRoutes serves sessions (seed 000) and the daemon's statistics.
type SessionRoutes struct {
	svc *session.Service
}

// NewSessionRoutes returns the session routes of svc.
func NewSessionRoutes(svc *session.Service) *SessionRoutes { return &SessionRoutes{svc: svc} }

// Register adds the routes to mux.
func (s *SessionRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/sessions/execute", s.execute)
	mux.HandleFunc("POST /api/v1/sessions/command", s.command)
	mux.HandleFunc("POST /api/v1/sessions/{id}/execute", s.execute)
	mux.HandleFunc("POST /api/v1/sessions/{id}/command", s.command)
	mux.HandleFunc("GET /api/v1/sessions", s.list)
	mux.HandleFunc("GET /api/v1/sessions/{id}", s.get)
	mux.HandleFunc("DELETE /api/v1/sessions/{id}", s.delete)
	mux.HandleFunc("POST /api/v1/sessions/{id}/keepalive", s.keepAlive)
	mux.HandleFunc("GET /api/v1/stats", s.stats)
}

// TenantMiddleware gives each request the tenant of its API key
// (session.WithTenant), so that sessions are the key's own. Serve it
// behind AuthMiddleware, which has checked the key.
func TenantMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := auth.Bearer(r.Header.Get("Authorization")); ok {
			r = r.WithContext(auth.WithTenant(r.Context(), auth.Tenant(key)))
		}
		next.ServeHTTP(w, r)
	})
}

// pathSession puts the session of the path into the body's field,
// refusing a body that names another.
func pathSession(r *http.Request, field *string) error {
	id := r.PathValue("id")
	if id == "" {
		return nil
	}
	if *field != "" && *field != id {
		return errdefs.Invalid("session_id %q differs from the session in the path %q", *field, id)
	}
	*field = id
	return nil
}

func (s *SessionRoutes) execute(w http.ResponseWriter, r *http.Request) {
	var req api.SessionExecuteRequest
	if err := decodeLimit(w, r, &req, service.MaxCodeBytes+maxJSONBody); err != nil {
		writeError(w, err)
		return
	}
	if err := pathSession(r, &req.SessionID); err != nil {
		writeError(w, err)
		return
	}
	resp, release, err := s.svc.ExecuteCode(r.Context(), req, nil)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	writeJSONText(w, http.StatusOK, resp, &resp.Output.Stdout, &resp.Output.Stderr)
}

func (s *SessionRoutes) command(w http.ResponseWriter, r *http.Request) {
	var req api.SessionCommandRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := pathSession(r, &req.SessionID); err != nil {
		writeError(w, err)
		return
	}
	resp, release, err := s.svc.ExecuteCommand(r.Context(), req, nil)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	writeExecJSON(w, resp, &resp.ExecResponse, req.OutputEncoding)
}

// list lists the sessions, a page of them with limit, cursor and order.
func (s *SessionRoutes) list(w http.ResponseWriter, r *http.Request) {
	out, err := s.page(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// page reads the page of sessions r asks for.
func (s *SessionRoutes) page(r *http.Request) (*api.SessionList, error) {
	opts, err := listOptions(r)
	if err != nil {
		return nil, err
	}
	p, err := service.Page(opts.Limit, opts.Cursor, opts.Order)
	if err != nil {
		return nil, err
	}
	items, next, err := s.svc.ListPage(r.Context(), p)
	if err != nil {
		return nil, err
	}
	return &api.SessionList{Items: items, Total: len(items), NextCursor: next}, nil
}

func (s *SessionRoutes) get(w http.ResponseWriter, r *http.Request) {
	sess, err := s.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (s *SessionRoutes) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.svc.Delete(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DeleteSessionResponse{SessionID: id, Status: "deleted"})
}

func (s *SessionRoutes) keepAlive(w http.ResponseWriter, r *http.Request) {
	var req api.KeepAliveRequest
	if r.ContentLength != 0 { // an empty body, chunked too, keeps the idle timeout
		if err := decode(w, r, &req); err != nil && !errors.Is(err, errEmptyBody) {
			writeError(w, err)
			return
		}
	}
	sess, err := s.svc.KeepAlive(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (s *SessionRoutes) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.Stats(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
