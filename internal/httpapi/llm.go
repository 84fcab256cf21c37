package httpapi

import (
	"net/http"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/service"
)

// LLMRoutes serve the LLM proxy's per-run keys under /api/v1/llm/keys.
// (The proxy itself, at gate.Prefix, is the gate's own route group: it
// answers in the clients' wire formats and checks keys itself, and
// AuthMiddleware lets it through.)
type LLMRoutes struct {
	keys *gate.Keys
}

// NewLLMRoutes returns the routes of keys.
func NewLLMRoutes(keys *gate.Keys) *LLMRoutes { return &LLMRoutes{keys: keys} }

// Register implements Routes.
func (l *LLMRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/llm/keys", l.createKey)
	mux.HandleFunc("GET /api/v1/llm/keys", l.listKeys)
	mux.HandleFunc("DELETE /api/v1/llm/keys/{id}", l.revokeKey)
}

func (l *LLMRoutes) createKey(w http.ResponseWriter, r *http.Request) {
	var req api.LLMKeyRequest
	if err := decodeStrict(w, r, &req, maxJSONBody); err != nil {
		writeError(w, err)
		return
	}
	k, err := l.keys.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, k)
}

// listKeys lists the keys, newest first unless order=asc; with limit and
// cursor, a page of them.
func (l *LLMRoutes) listKeys(w http.ResponseWriter, r *http.Request) {
	opts, err := listOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := service.NewestFirst(opts)
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := l.keys.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	list.Items, list.NextCursor, err = service.PageOf(list.Items, p, func(k api.LLMKey) (time.Time, string) { return k.CreatedAt, k.ID })
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (l *LLMRoutes) revokeKey(w http.ResponseWriter, r *http.Request) {
	if err := l.keys.Revoke(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
