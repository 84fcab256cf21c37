package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
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
	mux.HandleFunc("GET /api/v1/llm/exchanges/stream", l.stream)
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
	// The mark before the list: what ends while it is read comes again
	// rather than not at all.
	follow, err := l.svc.FollowCursor(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := l.svc.List(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	out.FollowCursor = follow
	writeJSON(w, http.StatusOK, out)
}

// stream follows the archive: an "exchange" event for each exchange the
// filters select as it ends, its id the cursor to resume after it
// (Last-Event-ID, which wins over ?after=, as a reconnecting EventSource
// sends it); first the ?last= exchanges that ended before. A comment every
// 15 s keeps an idle stream open through proxies; the stream ends when
// the client leaves, or with an error event when the daemon shuts down
// (service.LLMExchanges.EndFollows).
func (l *LLMArchiveRoutes) stream(w http.ResponseWriter, r *http.Request) {
	f, err := llmFilter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	from := service.LLMFollowFrom{Cursor: q.Get("after")}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from.Cursor = id
	}
	if v := q.Get("last"); v != "" {
		if from.Last, err = strconv.Atoi(v); err != nil {
			writeError(w, errdefs.Invalid("last %q: want a number from 0 to %d", v, service.MaxLLMFollowLast))
			return
		}
	}
	follow, err := l.svc.Follow(r.Context(), f, from)
	if err != nil {
		writeError(w, err)
		return
	}
	events := sse.Start(w)
	// The headers now: a follower waits for its first event knowing the
	// stream is open.
	_ = http.NewResponseController(w).Flush()
	stop := make(chan struct{})
	defer close(stop)
	go keepAlive(events, stop)
	err = follow(r.Context(), func(cursor string, x *api.LLMExchange) error {
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		return events.Send(sse.Event{ID: cursor, Name: api.LLMEventExchange, Data: b})
	})
	if err != nil && r.Context().Err() == nil {
		events.SendJSON("error", errdefs.Body(err))
	}
}

// keepAlive writes a comment to events every 15 s until stop is closed or
// a write fails.
func keepAlive(events *sse.Writer, stop <-chan struct{}) {
	t := time.NewTicker(keepAliveEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if events.Comment("keep-alive") != nil {
				return
			}
		}
	}
}

// keepAliveEvery is how often an idle event stream gets a comment.
const keepAliveEvery = 15 * time.Second

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
		err = l.svc.CheckExport(r.Context(), f)
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
