package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// llmEnv is an archive filled through a real proxy, whose callers say
// their sandbox and run in headers (the daemon knows them otherwise).
type llmEnv struct {
	arc  *archive.Archive
	base string // the proxy's base URL
	// tenant is the tenant of the calls call makes (llmtest.HeaderTenant).
	tenant string
	mu     sync.Mutex
	ids    []string
}

func newLLMEnv(t *testing.T, st store.LLMExchanges) *llmEnv {
	t.Helper()
	arc, err := archive.Open(context.Background(), archive.Config{
		Dir: filepath.Join(t.TempDir(), "llm"), Log: slog.New(slog.DiscardHandler),
	}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arc.Close() })
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", func(r *llm.Request) (*llm.Response, *llm.Error) {
		if strings.Contains(r.Messages[len(r.Messages)-1].Parts[0].Text, "fail") {
			return nil, &llm.Error{Kind: llm.ErrorInvalidRequest, Message: "no"}
		}
		return &llm.Response{ID: "r", Model: "real", Content: []llm.Part{llm.Text("ok")}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 5, OutputTokens: 1}}, nil
	})
	e := &llmEnv{arc: arc}
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "anthropic", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "a", Provider: "up"}, {Name: "b", Provider: "up"}},
	}, proxy.WithRecorder(arc), proxy.WithObserver(func(ex *proxy.Exchange) {
		e.mu.Lock()
		e.ids = append(e.ids, ex.ID)
		e.mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/llm", llmtest.WithTestCaller(p)))
	t.Cleanup(srv.Close)
	e.base = srv.URL + "/llm"
	return e
}

// call makes one Anthropic call with messages (user, assistant, user…)
// and returns the exchange's id once indexed.
func (e *llmEnv) call(t *testing.T, sandbox, run, model string, stream bool, messages ...string) string {
	t.Helper()
	var ms []string
	for i, m := range messages {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		ms = append(ms, fmt.Sprintf(`{"role":%q,"content":%q}`, role, m))
	}
	body := fmt.Sprintf(`{"model":%q,"max_tokens":10,"stream":%t,"messages":[%s]}`, model, stream, strings.Join(ms, ","))
	req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-Sandbox", sandbox)
	req.Header.Set("X-Test-Run", run)
	req.Header.Set(llmtest.HeaderTenant, e.tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := e.arc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ids[len(e.ids)-1]
}

func llmServer(t *testing.T) (*llmEnv, http.Handler) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newLLMEnv(t, st)
	srv := New(nil, nil, slog.New(slog.DiscardHandler), WithRoutes(NewLLMArchiveRoutes(service.NewLLMExchanges(e.arc))),
		WithMiddleware(TenantMiddleware))
	srv.SetReady(true)
	return e, srv.Handler()
}

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

func TestLLMExchangesFiltersAndPages(t *testing.T) {
	e, h := llmServer(t)
	start := time.Now().UTC()
	a1 := e.call(t, "sb1", "r1", "a", false, "one")
	b1 := e.call(t, "sb1", "r1", "b", true, "two")
	a2 := e.call(t, "sb2", "", "a", false, "fail please")
	mid := time.Now().UTC()
	a3 := e.call(t, "sb2", "r2", "a", true, "three")
	ids := func(target string) []string {
		rec := get(t, h, target)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
		}
		var l api.LLMExchangeList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range l.Items {
			out = append(out, x.ID)
		}
		if l.NextCursor != "" {
			out = append(out, "next")
		}
		return out
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{a1, b1, a2, a3}},
		{"?sandbox=sb2", []string{a2, a3}},
		{"?run=r1", []string{a1, b1}},
		{"?model=b", []string{b1}},
		{"?status=400", []string{a2}},
		{"?status=2xx", []string{a1, b1, a3}},
		{"?status=complete&sandbox=sb1", []string{a1, b1}},
		{"?since=" + mid.Format(time.RFC3339Nano), []string{a3}},
		{"?since=" + start.Format(time.RFC3339Nano) + "&until=" + mid.Format(time.RFC3339Nano), []string{a1, b1, a2}},
		{"?limit=3", []string{a1, b1, a2, "next"}},
		{"?order=desc", []string{a3, a2, b1, a1}},
		{"?order=desc&limit=3", []string{a3, a2, b1, "next"}},
		{"?order=desc&sandbox=sb1", []string{b1, a1}},
		{"?sandbox=nope", nil},
	} {
		if diff := cmp.Diff(tt.want, ids("/api/v1/llm/exchanges"+tt.query)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.query, diff)
		}
	}
	// Pages of 1 walk the whole list.
	var walked []string
	for target := "/api/v1/llm/exchanges?limit=1"; ; {
		var l api.LLMExchangeList
		_ = json.Unmarshal(get(t, h, target).Body.Bytes(), &l)
		for _, x := range l.Items {
			walked = append(walked, x.ID)
		}
		if l.NextCursor == "" {
			break
		}
		target = "/api/v1/llm/exchanges?limit=1&cursor=" + l.NextCursor
	}
	if diff := cmp.Diff([]string{a1, b1, a2, a3}, walked); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	// The fields of one.
	var l api.LLMExchangeList
	_ = json.Unmarshal(get(t, h, "/api/v1/llm/exchanges?model=b").Body.Bytes(), &l)
	x := l.Items[0]
	if x.SandboxID != "sb1" || x.RunID != "r1" || x.Format != "anthropic" || !x.Stream || !x.Passthrough || x.Status != 200 ||
		x.State != "complete" || x.Usage.InputTokens != 5 || x.Usage.OutputTokens != 1 || x.Provider != "up" || x.StoredBytes == 0 {
		t.Errorf("exchange %+v", x)
	}
}

func TestLLMBadFilters(t *testing.T) {
	_, h := llmServer(t)
	for _, q := range []string{
		"/api/v1/llm/exchanges?status=banana", "/api/v1/llm/exchanges?status=700", "/api/v1/llm/exchanges?since=yesterday",
		"/api/v1/llm/exchanges?until=2026-13-01", "/api/v1/llm/exchanges?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z",
		"/api/v1/llm/exchanges?limit=0", "/api/v1/llm/exchanges?limit=x", "/api/v1/llm/exchanges?cursor=nope",
		"/api/v1/llm/exchanges?order=newest", "/api/v1/llm/exchanges/export?order=up",
		"/api/v1/llm/exchanges/export?status=banana", "/api/v1/llm/exchanges/llx_x?raw=everything",
	} {
		rec := get(t, h, q)
		var body api.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != http.StatusBadRequest || err != nil || body.Code != api.CodeInvalidRequest {
			t.Errorf("%s: %d %s, want 400 INVALID_REQUEST", q, rec.Code, rec.Body)
		}
	}
	if rec := get(t, h, "/api/v1/llm/exchanges/llx_nope"); rec.Code != http.StatusNotFound {
		t.Errorf("unknown exchange: %d %s", rec.Code, rec.Body)
	}
}

func TestLLMExchangeParts(t *testing.T) {
	e, h := llmServer(t)
	id := e.call(t, "sb1", "", "a", true, "hello")
	var d api.LLMExchangeDetail
	rec := get(t, h, "/api/v1/llm/exchanges/"+id)
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if d.Request == nil || d.UpstreamRequest == nil || d.UpstreamResponse == nil || d.Response == nil ||
		len(d.Response.Chunks) == 0 || !strings.Contains(d.Request.Body, `"hello"`) {
		t.Fatalf("detail %+v", d)
	}
	for part, want := range map[string]string{
		"request": d.Request.Body, "upstream_request": d.UpstreamRequest.Body,
		"upstream_response": d.UpstreamResponse.Body, "response": d.Response.Body,
	} {
		rec := get(t, h, "/api/v1/llm/exchanges/"+id+"?raw="+part)
		if rec.Code != 200 || rec.Body.String() != want {
			t.Errorf("raw %s: %d %q, want %q", part, rec.Code, rec.Body, want)
		}
		if part == "response" && rec.Header().Get("Content-Type") != "text/event-stream" {
			t.Errorf("raw response served as %s", rec.Header().Get("Content-Type"))
		}
	}
}

func TestLLMExportAndConversations(t *testing.T) {
	e, h := llmServer(t)
	c1 := e.call(t, "sb1", "", "a", true, "q1")
	e.call(t, "sb1", "", "a", true, "q1", "ok", "q2")
	other := e.call(t, "sb1", "", "a", false, "something else")
	e.call(t, "sb1", "", "a", true, "q1", "ok", "q2", "ok", "q3")
	e.call(t, "sb2", "", "a", true, "q1", "ok", "q2") // another sandbox: its own conversation

	rec := get(t, h, "/api/v1/sandboxes/sb1/conversations")
	var cl api.LLMConversationList
	if err := json.Unmarshal(rec.Body.Bytes(), &cl); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var got [][2]any
	for _, c := range cl.Items {
		got = append(got, [2]any{c.ID, len(c.Exchanges)})
	}
	if diff := cmp.Diff([][2]any{{c1, 3}, {other, 1}}, got); diff != "" {
		t.Errorf("conversations (-want +got):\n%s", diff)
	}
	if cl.Items[0].Usage.InputTokens != 15 {
		t.Errorf("conversation usage %+v", cl.Items[0].Usage)
	}
	if rec := get(t, h, "/api/v1/sandboxes/none/conversations"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"items":[]`) {
		t.Errorf("no conversations: %d %s", rec.Code, rec.Body)
	}

	rec = get(t, h, "/api/v1/llm/exchanges/export?sandbox=sb1&limit=2")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s", rec.Code, rec.Header())
	}
	var lines []api.LLMExchangeDetail
	sc := bufio.NewScanner(bytes.NewReader(rec.Body.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d api.LLMExchangeDetail
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, d)
	}
	if len(lines) != 4 || lines[0].ID != c1 || lines[0].Response == nil || lines[0].Request == nil {
		t.Errorf("export: %d lines", len(lines))
	}
	if rec := get(t, h, "/api/v1/llm/exchanges/export?sandbox=none"); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("empty export: %d %q", rec.Code, rec.Body)
	}
}
