package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// llmUpstream serves a local OpenAI-compatible upstream with fixed
// answers at l until l is closed: a whole completion, or a stream of 20
// chunks. A stream asked for with the message "hold" sends its first
// chunk and then waits until the caller leaves.
func llmUpstream(l net.Listener) error {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"word "}}]}` + "\n\n"
	stream := strings.Repeat(chunk, 20) + `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}` + "\n\ndata: [DONE]\n\n"
	whole := `{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("word ", 20) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`
	srv := &http.Server{MaxHeaderBytes: 1 << 20, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, whole)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		if bytes.Contains(body, []byte(`"content":"hold"`)) {
			io.WriteString(w, chunk)
			f.Flush()
			<-r.Context().Done()
			return
		}
		for ev := range strings.SplitAfterSeq(stream, "\n\n") {
			io.WriteString(w, ev)
			f.Flush()
		}
	})}
	return srv.Serve(l)
}

// serveLLMUpstream is the bench's -llm-upstream mode: the fake upstream in
// a process of its own, as a real upstream is. It prints its URL and
// serves until its standard input closes.
func serveLLMUpstream() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println("http://" + l.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		l.Close()
	}()
	if err := llmUpstream(l); !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// startLLMUpstream runs this program's -llm-upstream mode and returns its
// URL and how to stop it.
func startLLMUpstream() (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "-llm-upstream")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("start the LLM upstream: %w", err)
	}
	return strings.TrimSpace(url), stop, nil
}

// benchLLM measures the daemon's LLM proxy (pass-through, OpenAI to
// OpenAI, the archive on, as the daemon serves it) against the same local
// upstream called directly, in one run: the latency it adds at a paced
// rate, throughput at saturation, memory per held stream; and the
// archive's size and write cost per exchange for the captured requests
// of the agent CLIs.
func benchLLM(bin string, dur time.Duration) error {
	// The upstream is a process of its own: called in process, the
	// direct route would skip the wake-ups between processes that both
	// hops of the proxied one pay (and a real upstream is never in the
	// client's process).
	upURL, stopUp, err := startLLMUpstream()
	if err != nil {
		return err
	}
	defer stopUp()
	dir, err := os.MkdirTemp("", "a2e-bench-llm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "llm.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n  - {name: up, type: openai, base_url: "+upURL+"/v1}\nmodels:\n  - {name: m, provider: up}\n"), 0o600); err != nil {
		return err
	}
	d, err := startDaemon(bin, "--llm-config", cfg)
	if err != nil {
		return err
	}
	defer d.stop()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 1024}}
	direct, proxied := upURL+"/v1/chat/completions", "http://"+d.addr+"/llm/v1/chat/completions"
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":%t}`, stream)
		cpu0, err := cpuTime(d.cmd.Process.Pid)
		if err != nil {
			return err
		}
		lat, err := openLoop(hc, 1000, dur, []string{direct, proxied}, body, stream)
		if err != nil {
			return err
		}
		cpu1, err := cpuTime(d.cmd.Process.Pid)
		if err != nil {
			return err
		}
		ds, ps := summarize(lat[0]), summarize(lat[1])
		what := "LLM call, whole answer"
		if stream {
			what = "LLM call, first stream event"
		}
		fmt.Printf("%-34s 1,000 req/s, archive on: via /llm p50 %s p99 %s | direct p50 %s p99 %s | added p50 %s p99 %s (%.2f×, %.2f×) | daemon CPU %s per request | target ≤ 0.20 ms p50, ≤ 1 ms p99 added\n",
			what, us(ps.p50), us(ps.p99), us(ds.p50), us(ds.p99), us(ps.p50-ds.p50), us(ps.p99-ds.p99),
			float64(ps.p50)/float64(ds.p50), float64(ps.p99)/float64(ds.p99), us((cpu1-cpu0)/time.Duration(dur.Seconds()*1000)))
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}`
	dn, pn, err := saturate(hc, direct, proxied, body, 64, dur)
	if err != nil {
		return err
	}
	fmt.Printf("%-34s 64 clients, 2 cores shared with client and upstream: via /llm %.0f req/s | direct %.0f req/s | %.2f× direct\n",
		"LLM calls at saturation", pn, dn, pn/dn)
	per, err := heldStreams(hc, proxied, d.cmd.Process.Pid, 1000)
	if err != nil {
		return err
	}
	fmt.Printf("%-34s daemon RSS growth with 1,000 streams open through /llm: %.1f KiB per stream (%.1f MiB per 1,000) | no baseline (absolute)\n",
		"LLM streams held", per/1024, per*1000/(1<<20))
	return benchArchive()
}

// openLoop issues requests at rate per second to each of urls, the urls
// interleaved, from a schedule that does not wait for answers (at most
// 256 in flight; past that they queue and the queueing counts). Each
// latency is from the request's scheduled time to the end of the answer,
// or for streams to its first byte. The first fifth is warm-up.
func openLoop(hc *http.Client, rate int, dur time.Duration, urls []string, body string, stream bool) ([][]time.Duration, error) {
	type job struct {
		i  int
		at time.Time
	}
	interval := time.Second / time.Duration(rate*len(urls))
	total := int(dur / interval)
	lat := make([][]time.Duration, len(urls))
	for k := range lat {
		lat[k] = make([]time.Duration, total/len(urls)+1)
	}
	jobs := make(chan job, total)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range 256 {
		wg.Go(func() {
			for j := range jobs {
				first, end, err := callLLM(hc, urls[j.i%len(urls)], body, j.at)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					continue
				}
				if stream {
					end = first
				}
				lat[j.i%len(urls)][j.i/len(urls)] = end
			}
		})
	}
	t0 := time.Now().Add(10 * time.Millisecond)
	for i := range total {
		at := t0.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		jobs <- job{i, at}
	}
	close(jobs)
	wg.Wait()
	if err := failed.Load(); err != nil {
		return nil, *err
	}
	for k := range lat {
		n := total / len(urls)
		lat[k] = lat[k][n/5 : n]
	}
	return lat, nil
}

// callLLM posts body to url and returns the time from since to the first
// byte of the answer and to its end.
func callLLM(hc *http.Client, url, body string, since time.Time) (time.Duration, time.Duration, error) {
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var b [1]byte
	if _, err := io.ReadFull(resp.Body, b[:]); err != nil {
		return 0, 0, err
	}
	first := time.Since(since)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return first, time.Since(since), nil
}

// saturate runs conc clients calling as fast as answers come, direct and
// through the proxy in turns of a quarter of dur each, and returns each
// one's requests per second.
func saturate(hc *http.Client, direct, proxied, body string, conc int, dur time.Duration) (float64, float64, error) {
	var rates [2]float64
	var spent [2]time.Duration
	for turn := range 8 {
		url := []string{direct, proxied}[turn%2]
		var done atomic.Int64
		var failed atomic.Pointer[error]
		stop := time.Now().Add(dur / 4)
		start := time.Now()
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for time.Now().Before(stop) {
					if _, _, err := callLLM(hc, url, body, time.Now()); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			return 0, 0, *err
		}
		if turn >= 2 { // the first of each is warm-up
			rates[turn%2] += float64(done.Load())
			spent[turn%2] += time.Since(start)
		}
	}
	return rates[0] / spent[0].Seconds(), rates[1] / spent[1].Seconds(), nil
}

// heldStreams opens n streams through url whose upstream holds them
// after the first event and returns the daemon's resident memory growth
// per stream while they are open.
func heldStreams(hc *http.Client, url string, pid, n int) (float64, error) {
	before, err := rss(pid)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"model":"m","messages":[{"role":"user","content":"hold"}],"stream":true}`
	errs := make(chan error, n)
	var open sync.WaitGroup
	open.Add(n)
	for range n {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				open.Done()
				errs <- err
				return
			}
			defer resp.Body.Close()
			var b [1]byte
			_, err = io.ReadFull(resp.Body, b[:])
			open.Done()
			errs <- err
			io.Copy(io.Discard, resp.Body)
		}()
	}
	open.Wait()
	time.Sleep(200 * time.Millisecond)
	after, err := rss(pid)
	if err != nil {
		return 0, err
	}
	for range n {
		if err := <-errs; err != nil {
			return 0, fmt.Errorf("held stream: %w", err)
		}
	}
	return float64(after-before) / float64(n), nil
}

// cpuTime is the CPU time a process has used, user and system.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / 100, nil // USER_HZ
}

// rss is a process's resident set size in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cliTurns are the captured requests of the agent CLIs, each with the
// event its answers stream in (200 of them per answer).
var cliTurns = []struct {
	cli    string
	format llm.Format
	path   string
	event  string
}{
	{"claude-code", llm.FormatAnthropic, "/v1/messages?beta=true",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word%d \"}}\n\n"},
	{"codex", llm.FormatResponses, "/v1/responses",
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"word%d \"}\n\n"},
	{"gemini-cli", llm.FormatGemini, "/v1beta/models/m:streamGenerateContent?alt=sse",
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"word%d \"}],\"role\":\"model\"},\"index\":0}],\"modelVersion\":\"m\"}\n\n"},
	{"opencode", llm.FormatOpenAI, "/v1/chat/completions",
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"}}]}\n\n"},
	{"qwen-code", llm.FormatOpenAI, "/v1/chat/completions",
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"}}]}\n\n"},
}

// benchArchive records the agent CLIs' captured requests, each with a
// streamed answer of 200 events, into an archive as the proxy does on a
// pass-through (both sides), and reports per exchange what it stores
// against what passed, the time its calls take on the request's
// goroutine, and how long the indexer then takes to catch up.
func benchArchive() error {
	dir, err := os.MkdirTemp("", "a2e-bench-archive-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		return err
	}
	defer st.Close() // again after the measurement: a no-op
	a, err := archive.Open(ctx, archive.Config{Dir: filepath.Join(dir, "llm"), Log: slog.New(slog.DiscardHandler)}, st)
	if err != nil {
		return err
	}
	defer a.Close()
	emptyDB := sizes(filepath.Join(dir, "state.db*"))
	const rounds = 100
	var raw int64
	var hot time.Duration
	h := http.Header{"Content-Type": {"text/event-stream"}}
	for _, c := range cliTurns {
		pretty, err := os.ReadFile(filepath.Join("internal", "llm", "llmtest", "testdata", "clis", c.cli+".json"))
		if err != nil {
			return err
		}
		var body bytes.Buffer
		if err := json.Compact(&body, pretty); err != nil {
			return err
		}
		var events [][]byte
		for i := range 200 {
			events = append(events, fmt.Appendf(nil, c.event, i))
		}
		req := httptest.NewRequest(http.MethodPost, "/llm"+c.path, nil)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer placeholder")
		upReq := httptest.NewRequest(http.MethodPost, "http://upstream"+c.path, nil)
		for range rounds {
			start := time.Now()
			ex := &proxy.Exchange{Inbound: c.format, Model: "m", Stream: true, Start: start}
			rec := a.Begin(req, body.Bytes(), ex)
			rec.UpstreamRequest(upReq, body.Bytes())
			rec.UpstreamResponse(200, h)
			rec.Response(200, h)
			raw += 2 * int64(body.Len())
			for _, ev := range events {
				rec.UpstreamData(ev)
				rec.ResponseData(ev)
				raw += 2 * int64(len(ev))
			}
			ex.Status, ex.Usage = 200, llm.Usage{InputTokens: 9000, OutputTokens: 600}
			rec.End(ex)
			hot += time.Since(start)
		}
	}
	n := int64(rounds * len(cliTurns))
	start := time.Now()
	if err := a.Sync(ctx); err != nil {
		return err
	}
	index := time.Since(start)
	// The index is what the store grew by, once closed (its write-ahead
	// log checkpointed into the database file).
	if err := a.Close(); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	log := sizes(filepath.Join(dir, "llm", "*.log"))
	indexed := sizes(filepath.Join(dir, "state.db*")) - emptyDB
	stored := log + indexed
	fmt.Printf("%-34s 5 agent CLIs' captured requests, 200-event streamed answers: %.1f KB stored (log %.1f + index %.1f) of %.1f KB passed (%.2f×) | %s on the request's goroutine | indexer caught up %s after the last\n",
		"LLM archive per exchange", float64(stored)/float64(n)/1e3, float64(log)/float64(n)/1e3, float64(indexed)/float64(n)/1e3,
		float64(raw)/float64(n)/1e3, float64(stored)/float64(raw), us(hot/time.Duration(n)), us(index))
	return nil
}

// sizes adds up the sizes of the files pattern matches.
func sizes(pattern string) int64 {
	var n int64
	files, _ := filepath.Glob(pattern)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func us(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Nanoseconds())/1e6) }
