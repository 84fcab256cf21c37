package archive_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

const upstreamKey = "sk-upstream-secret"

func TestMain(m *testing.M) {
	if dir := os.Getenv("ARCHIVE_TEST_CHILD"); dir != "" {
		child(dir, os.Getenv("ARCHIVE_TEST_LAG") != "")
		return
	}
	os.Exit(m.Run())
}

func openStore(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openArchive(t testing.TB, dir string, st store.LLMExchanges, cfg archive.Config) *archive.Archive {
	t.Helper()
	cfg.Dir = filepath.Join(dir, "archive")
	a, err := archive.Open(context.Background(), cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// serve runs a proxy recording into a, with one model "m" on up.
func serve(t testing.TB, a *archive.Archive, f llm.Format, upURL string) string {
	t.Helper()
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: upURL, APIKey: upstreamKey}},
		Models:    []proxy.Model{{Name: "m", Provider: "up", Model: "real-model"}},
	}, proxy.WithRecorder(a))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/llm", p))
	t.Cleanup(srv.Close)
	return srv.URL + "/llm"
}

// request is how a client of format f asks model m.
func request(f llm.Format, base, text string, stream bool) *http.Request {
	var path, body string
	h := http.Header{"Content-Type": {"application/json"}}
	switch f {
	case llm.FormatOpenAI:
		path = "/v1/chat/completions"
		body = fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, text)
		h.Set("Authorization", "Bearer sandbox-placeholder")
	case llm.FormatResponses:
		path = "/v1/responses"
		body = fmt.Sprintf(`{"model":"m","stream":%t,"input":%q}`, stream, text)
		h.Set("Authorization", "Bearer sandbox-placeholder")
	case llm.FormatAnthropic:
		path = "/v1/messages?beta=true"
		body = fmt.Sprintf(`{"model":"m","max_tokens":100,"stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, text)
		h.Set("x-api-key", "sandbox-placeholder")
		h.Set("anthropic-version", "2023-06-01")
	case llm.FormatGemini:
		path = "/v1beta/models/m:generateContent"
		if stream {
			path = "/v1beta/models/m:streamGenerateContent?alt=sse"
		}
		body = fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":%q}]}]}`, text)
		h.Set("x-goog-api-key", "sandbox-placeholder")
	}
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header = h
	return req
}

func answer(text string) func(*llm.Request) (*llm.Response, *llm.Error) {
	return func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r1", Model: "real-model", Content: []llm.Part{llm.Text(text)}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}}, nil
	}
}

// only returns the one exchange in the index, after the indexer caught up.
func only(t *testing.T, a *archive.Archive) *archive.Exchange {
	t.Helper()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	xs, _, err := a.List(context.Background(), store.LLMExchangeFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1 {
		t.Fatalf("%d exchanges in the index, want 1", len(xs))
	}
	x, err := a.Read(context.Background(), xs[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestRecordingIsByteExact: for pass-through and translated calls, plain
// and streamed, the archive holds exactly the bytes the client sent, the
// upstream received and sent, and the client received.
func TestRecordingIsByteExact(t *testing.T) {
	for _, tt := range []struct{ in, out llm.Format }{
		{llm.FormatOpenAI, llm.FormatOpenAI}, {llm.FormatResponses, llm.FormatResponses},
		{llm.FormatAnthropic, llm.FormatAnthropic}, {llm.FormatGemini, llm.FormatGemini},
		{llm.FormatAnthropic, llm.FormatOpenAI}, {llm.FormatGemini, llm.FormatResponses},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-%s/stream=%v", tt.in, tt.out, stream), func(t *testing.T) {
				dir := t.TempDir()
				a := openArchive(t, dir, openStore(t, dir), archive.Config{})
				up := llmtest.NewFakeUpstream(t, proxy.Codecs[tt.out], upstreamKey, answer("hello from upstream, in pieces"))
				base := serve(t, a, tt.out, up.URL)
				req := request(tt.in, base, "hi there", stream)
				sent, _ := io.ReadAll(req.Body)
				req.Body = io.NopCloser(bytes.NewReader(sent))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, got)
				}
				x := only(t, a)
				call := up.Calls()[0]
				up1 := x.Upstream()
				if up1 == nil || up1.Response == nil || x.Response == nil {
					t.Fatalf("parts missing: %+v", x)
				}
				for _, c := range []struct {
					name      string
					got, want []byte
				}{
					{"request", x.Request.Body, sent},
					{"upstream request", up1.Request.Body, call.Body},
					{"upstream response", up1.Response.Body, call.Sent},
					{"response", x.Response.Body, got},
				} {
					if !bytes.Equal(c.got, c.want) {
						t.Errorf("%s: archived\n%q\nwant\n%q", c.name, c.got, c.want)
					}
				}
				checkChunks(t, up1.Response, 1)
				checkChunks(t, x.Response, 1)
				meta := x.LLMExchange
				// (Chat Completions streams have usage only when asked for.)
				usage := tt.in == llm.FormatOpenAI && stream || meta.InputTokens == 7 && meta.OutputTokens == 3
				if meta.State != store.LLMComplete || meta.Status != 200 || !usage ||
					meta.Provider != "up" || meta.UpstreamModel != "real-model" || meta.Model != "m" || meta.Stream != stream ||
					meta.Passthrough != (tt.in == tt.out) || meta.FirstByte <= 0 || meta.Duration < meta.FirstByte ||
					meta.ResponseBytes != int64(len(got)) || meta.RequestBytes != int64(len(sent)) {
					t.Errorf("index record %+v", meta)
				}
				// No key is archived: neither the client's nor the upstream's.
				for _, h := range []http.Header{x.Request.Header, up1.Request.Header} {
					for k, vs := range h {
						for _, v := range vs {
							if strings.Contains(v, "sandbox-placeholder") || strings.Contains(v, upstreamKey) {
								t.Errorf("header %s archived with a key: %q", k, v)
							}
						}
					}
				}
			})
		}
	}
}

// TestConversations: a request whose messages extend an earlier one's
// joins its conversation, also when both are indexed in one batch.
func TestConversations(t *testing.T) {
	dir := t.TempDir()
	a := openArchive(t, dir, openStore(t, dir), archive.Config{})
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], upstreamKey, answer("ok"))
	base := serve(t, a, llm.FormatOpenAI, up.URL)
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"one"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"one"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"two"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"one"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"one"},{"role":"assistant","content":"ok"},{"role":"user","content":"again"}]}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	xs, _, err := a.List(context.Background(), store.LLMExchangeFilter{}, store.Page{})
	if err != nil || len(xs) != 5 {
		t.Fatalf("%d exchanges, %v", len(xs), err)
	}
	// The second is no follow-up of the first (a system prompt comes
	// first), nor the third of the second; the fourth continues the
	// second, the fifth the first.
	var got []string
	for _, x := range xs {
		got = append(got, x.Conversation)
	}
	if diff := cmp.Diff([]string{xs[0].ID, xs[1].ID, xs[2].ID, xs[1].ID, xs[0].ID}, got); diff != "" {
		t.Errorf("conversations (-want +got):\n%s", diff)
	}
}

// TestClientDisconnect: a client that leaves mid-stream leaves a complete
// record marked client_gone, with what had passed until then.
func TestClientDisconnect(t *testing.T) {
	for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} { // pass-through, translated
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			a := openArchive(t, dir, openStore(t, dir), archive.Config{FlushInterval: time.Millisecond})
			base := serve(t, a, llm.FormatAnthropic, endless(t))
			ctx, cancel := context.WithCancel(context.Background())
			req := request(f, base, "talk forever", true).WithContext(ctx)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 256)
			for n := 0; n < 1500; { // a few pieces
				k, err := resp.Body.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				n += k
			}
			cancel()
			resp.Body.Close()
			var x *archive.Exchange
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				_ = a.Sync(context.Background())
				xs, _, _ := a.List(context.Background(), store.LLMExchangeFilter{State: store.LLMClientGone}, store.Page{})
				if len(xs) == 1 {
					if x, err = a.Read(context.Background(), xs[0]); err != nil {
						t.Fatal(err)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no exchange marked client_gone")
				}
			}
			if x.Response == nil || len(x.Response.Body) == 0 || x.Upstream() == nil || x.Upstream().Response == nil ||
				len(x.Upstream().Response.Body) == 0 || x.Error == "" || x.Status != 200 || x.FirstByte <= 0 {
				t.Errorf("record of a client gone: %+v", x.LLMExchange)
			}
			// The upstream wrote a piece every 5ms: each is archived with
			// its own arrival time.
			checkChunks(t, x.Upstream().Response, 3)
			checkChunks(t, x.Response, 3)
			if !bytes.HasPrefix(x.Response.Body, []byte("event: ")) && !bytes.HasPrefix(x.Response.Body, []byte("data: ")) {
				t.Errorf("response archived as %q", x.Response.Body)
			}
		})
	}
}

// checkChunks checks a body's chunks: at least min, in time order, their
// sizes adding up to the body.
func checkChunks(t *testing.T, m *archive.Message, min int) {
	t.Helper()
	n := 0
	for i, c := range m.Chunks {
		n += c.Size
		if i > 0 && c.At < m.Chunks[i-1].At {
			t.Errorf("chunk times go back: %v", m.Chunks)
		}
	}
	if len(m.Chunks) < min || n != len(m.Body) {
		t.Errorf("%d chunks of %d bytes for a body of %d, want at least %d", len(m.Chunks), n, len(m.Body), min)
	}
}

// endless is an Anthropic upstream that streams until its client leaves.
func endless(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		enc := proxy.Codecs[llm.FormatAnthropic].NewStreamEncoder(llm.NewSSEWriter(w), &llm.Request{})
		_ = enc.Encode(&llm.Event{Type: llm.EventStart, ID: "m1", Model: "slow"})
		_ = enc.Encode(&llm.Event{Type: llm.EventBlockStart, Block: llm.Text("")})
		for i := 0; ; i++ {
			if err := enc.Encode(&llm.Event{Type: llm.EventDelta, Delta: llm.DeltaText, Text: fmt.Sprint(i, " ")}); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCutCloseDelimited: a whole answer, passed through, that only its
// connection's close delimits (no Content-Length, not chunked) and that
// is cut midway is the client's 502 in the provider's own error form, and
// is archived so, with its error and the part that came; it was a 200
// with the part, archived as a whole answer.
func TestCutCloseDelimited(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"+
			`{"id":"c","object":"chat.completion","model":"real-model","choices":[{"index":0,"message":{"role":"assistant","content":"hel`)
	}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	a := openArchive(t, dir, openStore(t, dir), archive.Config{FlushInterval: time.Millisecond})
	base := serve(t, a, llm.FormatOpenAI, up.URL+"/v1")
	resp, err := http.DefaultClient.Do(request(llm.FormatOpenAI, base, "hi", false))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	e := proxy.Codecs[llm.FormatOpenAI].DecodeError(resp.StatusCode, got)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(e.Message, "broke off") ||
		!strings.Contains(string(got), `"error":{`) {
		t.Errorf("client got %d %s, want a 502 in OpenAI's error form saying the answer broke off", resp.StatusCode, got)
	}
	x := only(t, a)
	if x.Status != http.StatusBadGateway || !strings.Contains(x.Error, "broke off") || x.Upstream() == nil || x.Upstream().Response == nil ||
		!bytes.HasSuffix(x.Upstream().Response.Body, []byte(`"content":"hel`)) {
		t.Errorf("archived as %+v", x.LLMExchange)
	}
}

// TestKill9 runs a daemon-like child process that streams exchanges
// through the archive, kills it with SIGKILL mid-stream, reopens the
// archive and finds every exchange the child saw complete, and the one
// cut off marked interrupted. With a lagging index, every record comes
// from the log alone.
func TestKill9(t *testing.T) {
	for _, lag := range []bool{false, true} {
		t.Run(fmt.Sprintf("lagging-index=%v", lag), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "ARCHIVE_TEST_CHILD="+dir)
			if lag {
				cmd.Env = append(cmd.Env, "ARCHIVE_TEST_LAG=1")
			}
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := map[string]string{} // id → the text asked
			sc := bufio.NewScanner(out)
			for len(done) < 8 && sc.Scan() {
				id, text, _ := strings.Cut(sc.Text(), " ")
				done[id] = text
			}
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if len(done) < 8 {
				t.Fatalf("the child completed %d exchanges before it died", len(done))
			}
			st := openStore(t, dir)
			a := openArchive(t, dir, st, archive.Config{})
			for id, text := range done {
				x, err := a.Get(context.Background(), id)
				if err != nil {
					t.Errorf("exchange %s lost: %v", id, err)
					continue
				}
				if x.State != store.LLMComplete || x.Status != 200 || x.OutputTokens == 0 {
					t.Errorf("exchange %s: %+v", id, x)
				}
				rx, err := a.Read(context.Background(), x)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(rx.Request.Body, []byte(text)) || rx.Response == nil ||
					streamText(t, rx.Response.Body) != "answer to "+text {
					t.Errorf("exchange %s read back without its request or answer: %q", id, rx.Request.Body)
				}
			}
			cut, _, err := a.List(context.Background(), store.LLMExchangeFilter{State: store.LLMInterrupted}, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			// The endless stream, and perhaps the question after the last
			// printed.
			var endless int
			for _, x := range cut {
				rx, err := a.Read(context.Background(), x)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(rx.Request.Body, []byte("talk forever")) {
					endless++
				}
				if done[x.ID] != "" {
					t.Errorf("exchange %s, complete in the child, recovered as interrupted", x.ID)
				}
			}
			if endless != 1 || len(cut) > 2 {
				t.Errorf("%d interrupted exchanges, %d of them the endless one", len(cut), endless)
			}
			if n, _, _ := a.List(context.Background(), store.LLMExchangeFilter{State: store.LLMInProgress}, store.Page{}); len(n) != 0 {
				t.Errorf("%d exchanges still in progress after recovery", len(n))
			}
		})
	}
}

// streamText is the text of an Anthropic stream.
func streamText(t *testing.T, body []byte) string {
	evs, err := llmtest.DecodeStream(proxy.Codecs[llm.FormatAnthropic], bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var acc llm.Accumulator
	for i := range evs {
		acc.Add(&evs[i])
	}
	var text string
	for _, p := range acc.Response().Content {
		text += p.Text
	}
	return text
}

// lagging is a store whose index never catches up.
type lagging struct{ store.LLMExchanges }

func (lagging) PutLLMExchanges(ctx context.Context, _ []*store.LLMExchange, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// child is TestKill9's process: one endless stream in flight, and
// streamed exchanges one after another, each printed as "id text" once
// its client has read the whole answer.
func child(dir string, lag bool) {
	t := &testing.T{}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		panic(err)
	}
	var ix store.LLMExchanges = st
	if lag {
		ix = lagging{st}
	}
	a, err := archive.Open(context.Background(), archive.Config{Dir: filepath.Join(dir, "archive"), FlushInterval: time.Millisecond}, ix)
	if err != nil {
		panic(err)
	}
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", func(r *llm.Request) (*llm.Response, *llm.Error) {
		return answer("answer to " + r.Messages[0].Parts[0].Text)(r)
	})
	var (
		mu   sync.Mutex
		last string
	)
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "anthropic", BaseURL: up.URL}, {Name: "slow", Type: "anthropic", BaseURL: endless(t)}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}, {Name: "endless", Provider: "slow"}},
	}, proxy.WithRecorder(a), proxy.WithObserver(func(ex *proxy.Exchange) {
		mu.Lock()
		last = ex.ID
		mu.Unlock()
	}))
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/llm", p))
	hang := request(llm.FormatAnthropic, srv.URL+"/llm", "talk forever", true)
	body := `{"model":"endless","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"talk forever"}]}`
	hang.Body, hang.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	resp, err := http.DefaultClient.Do(hang)
	if err != nil {
		panic(err)
	}
	go io.Copy(io.Discard, resp.Body)
	for i := 0; ; i++ {
		text := fmt.Sprintf("question-%d", i)
		resp, err := http.DefaultClient.Do(request(llm.FormatAnthropic, srv.URL+"/llm", text, true))
		if err != nil {
			panic(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		id := last
		mu.Unlock()
		fmt.Printf("%s %s\n", id, text)
	}
}

// TestRetention: segments past the size limit go, with their index
// records; the active segment stays.
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	a := openArchive(t, dir, openStore(t, dir), archive.Config{SegmentSize: 4 << 10, MaxSize: 16 << 10})
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], upstreamKey, answer(strings.Repeat("x", 3000)))
	base := serve(t, a, llm.FormatOpenAI, up.URL)
	for i := range 30 {
		resp, err := http.DefaultClient.Do(request(llm.FormatOpenAI, base, fmt.Sprint("q", i), false))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total int64
	segs, _ := filepath.Glob(filepath.Join(dir, "archive", "*.log"))
	for _, s := range segs {
		fi, _ := os.Stat(s)
		total += fi.Size()
	}
	if total > 16<<10+4<<10 {
		t.Errorf("%d bytes kept, limit 16 KiB", total)
	}
	xs, _, err := a.List(context.Background(), store.LLMExchangeFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) == 0 || len(xs) >= 30 {
		t.Fatalf("%d exchanges left of 30", len(xs))
	}
	for _, x := range xs { // every one left reads back
		if _, err := a.Read(context.Background(), x); err != nil {
			t.Errorf("read %s after sweep: %v", x.ID, err)
		}
	}
	if diff := cmp.Diff("q29", lastQuestion(t, a, xs[len(xs)-1])); diff != "" {
		t.Errorf("newest kept (-want +got):\n%s", diff)
	}
	// An exchange whose segment goes between the index and the read is
	// not found, not an internal error.
	for _, s := range segs {
		os.Remove(s)
	}
	if _, err := a.Read(context.Background(), xs[0]); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("read of a swept exchange: %v, want not found", err)
	}
}

func lastQuestion(t *testing.T, a *archive.Archive, x *store.LLMExchange) string {
	rx, err := a.Read(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	r, err := proxy.Codecs[llm.FormatOpenAI].DecodeRequest(rx.Request.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Messages[0].Parts[0].Text
}
