package httpapi

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// registerTerminals serves the persistent terminals of a sandbox.
func (s *Server) registerTerminals(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/terminals", s.createTerminal)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/terminals", s.listTerminals)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/terminals/{name}", s.getTerminal)
	mux.HandleFunc("DELETE /api/v1/sandboxes/{id}/terminals/{name}", s.deleteTerminal)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/terminals/{name}/attach", s.attachTerminal)
}

func (s *Server) createTerminal(w http.ResponseWriter, r *http.Request) {
	var req api.CreateTerminalRequest
	if err := decodeStrict(w, r, &req, maxJSONBody); err != nil {
		writeError(w, err)
		return
	}
	info, err := s.sandboxes.CreateTerminal(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

func (s *Server) listTerminals(w http.ResponseWriter, r *http.Request) {
	list, err := s.sandboxes.Terminals(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getTerminal(w http.ResponseWriter, r *http.Request) {
	info, err := s.sandboxes.TerminalInfo(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) deleteTerminal(w http.ResponseWriter, r *http.Request) {
	info, err := s.sandboxes.DeleteTerminal(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// attachTerminal serves GET
// /api/v1/sandboxes/{id}/terminals/{name}/attach
// (?since=N&readonly=true&takeover=true): a WebSocket to a persistent
// terminal in either dialect of the one-shot terminal, its output
// replayed from since, with offset messages wherever the output does not
// go on from what the client expects. A writer already attached, a
// terminal or sandbox that is not there, are refused before the upgrade;
// the terminal goes on when the connection ends.
func (s *Server) attachTerminal(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, errdefs.Invalid("this endpoint speaks WebSocket only: send an upgrade request"))
		return
	}
	opts, err := attachOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := spendTicket(r); err != nil {
		refuseAuth(w, err)
		return
	}
	sess := newTerminalSession(offersProtocol(r, api.TerminalProtocolK8s), opts.Since)
	t, err := s.sandboxes.AttachTerminal(r.Context(), r.PathValue("id"), r.PathValue("name"), opts, sess.output)
	if err != nil {
		writeError(w, err)
		return
	}
	s.serveTerminal(w, r, sess, t)
}

// attachOptions reads the query of a persistent terminal's attachment.
func attachOptions(r *http.Request) (service.AttachTerminalOptions, error) {
	q := r.URL.Query()
	var opts service.AttachTerminalOptions
	since, err := strconv.ParseInt(cmp.Or(q.Get("since"), "0"), 10, 64)
	if err != nil {
		return opts, errdefs.Invalid("since %q is not an offset", q.Get("since"))
	}
	opts.Since = since
	for name, dst := range map[string]*bool{"readonly": &opts.ReadOnly, "takeover": &opts.Takeover} {
		if v := q.Get(name); v != "" {
			if *dst, err = strconv.ParseBool(v); err != nil {
				return opts, errdefs.Invalid("%s %q is not a boolean", name, v)
			}
		}
	}
	return opts, service.CheckTerminalAttach(opts)
}
