package archive_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
)

// BenchmarkRecord is the archive's cost per exchange on the request's
// goroutine, for an agent's typical streamed turn: a 30 KB conversation
// in, 300 events (about 40 KB) out, recorded on both sides. It reports
// what the archive stores per exchange (stored-B/exchange) beside the
// bytes that passed (raw-B/exchange).
func BenchmarkRecord(b *testing.B) {
	dir := b.TempDir()
	a := openArchive(b, dir, openStore(b, dir), archive.Config{})
	var conv strings.Builder
	conv.WriteString(`{"model":"m","max_tokens":4096,"stream":true,"messages":[`)
	for i := 0; conv.Len() < 30<<10; i++ {
		fmt.Fprintf(&conv, `{"role":"user","content":"run the tests in package %d and fix what fails"},`, i)
		fmt.Fprintf(&conv, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%d","name":"bash","input":{"command":"go test ./pkg%d/..."}}]},`, i, i)
	}
	conv.WriteString(`{"role":"user","content":"go on"}]}`)
	body := []byte(conv.String())
	var events [][]byte
	for i := range 300 {
		events = append(events, fmt.Appendf(nil, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word%d \"}}\n\n", i))
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "placeholder")
	up := httptest.NewRequest(http.MethodPost, "http://upstream/v1/messages", nil)
	h := http.Header{"Content-Type": {"text/event-stream"}}
	raw := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ex := &proxy.Exchange{Inbound: llm.FormatAnthropic, Model: "m", Stream: true, Start: time.Now()}
		rec := a.Begin(req, body, ex)
		rec.UpstreamRequest(up, body)
		rec.UpstreamResponse(200, h)
		rec.Response(200, h)
		raw = 2 * len(body)
		for _, ev := range events {
			rec.UpstreamData(ev)
			rec.ResponseData(ev)
			raw += 2 * len(ev)
		}
		ex.Status, ex.Usage = 200, llm.Usage{InputTokens: 9000, OutputTokens: 600}
		rec.End(ex)
	}
	b.StopTimer()
	if err := a.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	x, err := a.Get(context.Background(), lastID(b, a))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(x.StoredBytes), "stored-B/exchange")
	b.ReportMetric(float64(raw), "raw-B/exchange")
}

func lastID(b *testing.B, a *archive.Archive) string {
	xs, _, err := a.List(context.Background(), store.LLMExchangeFilter{}, store.Page{})
	if err != nil || len(xs) == 0 {
		b.Fatalf("list: %d, %v", len(xs), err)
	}
	return xs[len(xs)-1].ID
}
