package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// llmUpstream is a local OpenAI-compatible upstream with fixed answers:
// a whole completion, or a stream of 20 chunks.
func llmUpstream() *httptest.Server {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"word "}}]}` + "\n\n"
	stream := strings.Repeat(chunk, 20) + `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}` + "\n\ndata: [DONE]\n\n"
	whole := `{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("word ", 20) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, whole)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for ev := range strings.SplitAfterSeq(stream, "\n\n") {
			io.WriteString(w, ev)
			f.Flush()
		}
	}))
}

// benchLLM measures what the daemon's LLM proxy adds to a call: the same
// request straight to a local upstream and through the daemon's /llm
// (pass-through, OpenAI to OpenAI), interleaved one by one on kept-alive
// connections; for streams, the time to the first event.
func benchLLM(bin string, n int) error {
	up := llmUpstream()
	defer up.Close()
	dir, err := os.MkdirTemp("", "a2e-bench-llm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "llm.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n  - {name: up, type: openai, base_url: "+up.URL+"/v1}\nmodels:\n  - {name: m, provider: up}\n"), 0o600); err != nil {
		return err
	}
	d, err := startDaemon(bin, "--llm-config", cfg)
	if err != nil {
		return err
	}
	defer d.stop()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	// call posts body to url and returns the time to the first byte of
	// the answer and to its end.
	call := func(url, body string) (time.Duration, time.Duration, error) {
		start := time.Now()
		resp, err := hc.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		var b [1]byte
		if _, err := io.ReadFull(resp.Body, b[:]); err != nil {
			return 0, 0, err
		}
		first := time.Since(start)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("%s: status %d", url, resp.StatusCode)
		}
		return first, time.Since(start), nil
	}
	direct, proxied := up.URL+"/v1/chat/completions", "http://"+d.addr+"/llm/v1/chat/completions"
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":%t}`, stream)
		var dd, pd []time.Duration
		for i := range n + n/10 {
			df, dt, err := call(direct, body)
			if err != nil {
				return err
			}
			pf, pt, err := call(proxied, body)
			if err != nil {
				return err
			}
			if i < n/10 {
				continue // warm-up
			}
			if stream {
				dt, pt = df, pf
			}
			dd, pd = append(dd, dt), append(pd, pt)
		}
		ds, ps := summarize(dd), summarize(pd)
		what := "LLM call, whole answer"
		if stream {
			what = "LLM call, first stream event"
		}
		fmt.Printf("%-34s via /llm p50 %s p99 %s | direct p50 %s p99 %s | added p50 %s p99 %s | target ≤ 0.20 ms p50, ≤ 1 ms p99 added\n",
			what, us(ps.p50), us(ps.p99), us(ds.p50), us(ds.p99), us(ps.p50-ds.p50), us(ps.p99-ds.p99))
	}
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Nanoseconds())/1e6) }
