package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// BenchmarkProxy measures what the proxy adds to a call, sequentially on
// kept-alive connections: the same request straight to a local fake
// upstream, through the proxy passed through, and through the proxy
// translated (an Anthropic client to an OpenAI upstream). ttfb is the time
// to the first byte of the answer (for streams, the first event); p50 and
// p99 are over the run; passthrough+archive records every exchange into
// an archive (package archive). The figures of the product's target (added p50 and
// p99 at 1,000 req/s, archive on) are for make bench once the proxy is
// wired into the daemon; these isolate the library's share.
func BenchmarkProxy(b *testing.B) {
	up := llmtest.NewFakeUpstream(b, proxy.Codecs[llm.FormatOpenAI], "k", answer(strings.Repeat("word ", 50)))
	up.Chunk = 5 // 50 text events when streamed
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL, APIKey: "k"}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(stripLLM(p))
	defer srv.Close()
	// The same proxy recording every exchange into an archive.
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	arc, err := archive.Open(context.Background(), archive.Config{Dir: filepath.Join(dir, "llm"), Log: slog.New(slog.DiscardHandler)}, st)
	if err != nil {
		b.Fatal(err)
	}
	defer arc.Close()
	pa, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL, APIKey: "k"}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	}, proxy.WithRecorder(arc))
	if err != nil {
		b.Fatal(err)
	}
	srvA := httptest.NewServer(stripLLM(pa))
	defer srvA.Close()
	client := &http.Client{Transport: proxy.DefaultTransport()}
	sizes := map[string]int{"small": 1, "30KB": 300}
	for _, size := range []string{"small", "30KB"} {
		turns := strings.Repeat(`{"role":"user","content":"`+strings.Repeat("x", 90)+`"},`, sizes[size])
		for _, stream := range []bool{false, true} {
			openaiBody := fmt.Sprintf(`{"model":"m","messages":[%s{"role":"user","content":"hi"}],"stream":%t}`, turns, stream)
			anthropicBody := fmt.Sprintf(`{"model":"m","max_tokens":100,"messages":[%s{"role":"user","content":"hi"}],"stream":%t}`, turns, stream)
			for _, route := range []struct{ name, url, body string }{
				{"direct", up.URL + "/chat/completions", openaiBody},
				{"passthrough", srv.URL + "/llm/v1/chat/completions", openaiBody},
				{"passthrough+archive", srvA.URL + "/llm/v1/chat/completions", openaiBody},
				{"translated", srv.URL + "/llm/v1/messages", anthropicBody},
			} {
				b.Run(fmt.Sprintf("%s/stream=%v/%s", size, stream, route.name), func(b *testing.B) {
					var ttfb []time.Duration
					for b.Loop() {
						start := time.Now()
						req, _ := http.NewRequest(http.MethodPost, route.url, strings.NewReader(route.body))
						req.Header.Set("Authorization", "Bearer k")
						req.Header.Set("x-api-key", "k")
						resp, err := client.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						var first [1]byte
						if _, err := io.ReadFull(resp.Body, first[:]); err != nil {
							b.Fatal(err)
						}
						ttfb = append(ttfb, time.Since(start))
						rest, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || (!stream && !bytes.Contains(rest, []byte("word"))) {
							b.Fatalf("%d %s", resp.StatusCode, rest)
						}
					}
					slices.Sort(ttfb)
					b.ReportMetric(float64(ttfb[len(ttfb)/2].Microseconds()), "ttfb-p50-µs")
					b.ReportMetric(float64(ttfb[len(ttfb)*99/100].Microseconds()), "ttfb-p99-µs")
				})
			}
		}
	}
}
