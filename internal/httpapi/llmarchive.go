package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// LLMArchiveRoutes serve the LLM proxy's archive: exchanges, their raw parts,
// the JSONL export, and a sandbox's conversations.
type LLMArchiveRoutes struct {
	svc *service.LLMExchanges
}

var _ Routes = (*LLMArchiveRoutes)(nil)

// NewLLMArchiveRoutes returns the archive routes of svc.
func NewLLMArchiveRoutes(svc *service.LLMExchanges) *LLMArchiveRoutes {
	return &LLMArchiveRoutes{svc: svc}
}

// Register adds the routes to mux; /export is more specific than {id}.
func (l *LLMArchiveRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/llm/exchanges", l.list)
	mux.HandleFunc("GET /api/v1/llm/exchanges/export", l.export)
	mux.HandleFunc("GET /api/v1/llm/exchanges/{id}", l.get)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/conversations", l.conversations)
}

// llmFilter reads the filter query parameters.
func llmFilter(r *http.Request) (service.LLMFilter, error) {
	q := r.URL.Query()
	f := service.LLMFilter{
		SandboxID: q.Get("sandbox"), RunID: q.Get("run"), Model: q.Get("model"), Conversation: q.Get("conversation"),
		Status: q.Get("status"), Since: q.Get("since"), Until: q.Get("until"),
	}
	var err error
	f.ListOptions, err = listOptions(r)
	return f, err
}

func (l *LLMArchiveRoutes) list(w http.ResponseWriter, r *http.Request) {
	f, err := llmFilter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := l.svc.List(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (l *LLMArchiveRoutes) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if part := r.URL.Query().Get("raw"); r.URL.Query().Has("raw") {
		ct, body, err := l.svc.Raw(r.Context(), id, part)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(body)
		return
	}
	out, err := l.svc.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// export streams one exchange per line (JSON Lines), each flushed as it
// is read; an error after the first line ends the stream early (the
// client sees a last line that is not complete, or fewer lines).
func (l *LLMArchiveRoutes) export(w http.ResponseWriter, r *http.Request) {
	f, err := llmFilter(r)
	if err == nil {
		err = l.svc.CheckExport(f)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started := false
	err = l.svc.Export(r.Context(), f, func(x *api.LLMExchangeDetail) error {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if err := enc.Encode(x); err != nil {
			return err
		}
		_ = rc.Flush()
		return nil
	})
	switch {
	case err != nil && !started:
		writeError(w, err)
	case err != nil:
		panic(http.ErrAbortHandler) // the client must not take a cut export for a whole one
	case !started:
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
}

func (l *LLMArchiveRoutes) conversations(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" {
		writeError(w, errdefs.Invalid("sandbox id is required"))
		return
	}
	out, err := l.svc.Conversations(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
