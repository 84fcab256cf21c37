package llmtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
)

// FakeUpstream is an in-process model server of one wire format: it
// decodes what it is sent with its codec, checks the key, and answers with
// Answer's response, whole or streamed (text and arguments in pieces of
// Chunk bytes), recording every call and every byte it sent back.
type FakeUpstream struct {
	Codec  llm.Codec
	Answer func(*llm.Request) (*llm.Response, *llm.Error)
	// Key is the key callers must present the format's way.
	Key   string
	Chunk int
	// URL is the base URL to configure a provider with.
	URL string

	mu    sync.Mutex
	calls []Call
}

// Call is one request a FakeUpstream served.
type Call struct {
	Path, Query string
	Header      http.Header
	Body        []byte
	Request     *llm.Request // nil when the body did not decode
	Stream      bool
	Sent        []byte // the response body, as written
}

// NewFakeUpstream starts a fake upstream for c, closed when t ends.
func NewFakeUpstream(t testing.TB, c llm.Codec, key string, answer func(*llm.Request) (*llm.Response, *llm.Error)) *FakeUpstream {
	f := &FakeUpstream{Codec: c, Answer: answer, Key: key, Chunk: 4}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	if c.Format() == llm.FormatOpenAI || c.Format() == llm.FormatResponses {
		f.URL += "/v1"
	}
	return f
}

// Calls returns the calls received so far; a call still being answered
// has no Sent bytes yet, and no Request before it is decoded.
func (f *FakeUpstream) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

func (f *FakeUpstream) presented(h http.Header) string {
	switch f.Codec.Format() {
	case llm.FormatAnthropic:
		return h.Get("x-api-key")
	case llm.FormatGemini:
		return h.Get("x-goog-api-key")
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// ServeHTTP implements http.Handler.
func (f *FakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call := Call{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	var sent bytes.Buffer
	out := io.MultiWriter(w, &sent)
	// The call is listed as soon as it arrives (a client may see the answer
	// before this handler returns) and completed when the handler ends.
	f.mu.Lock()
	i := len(f.calls)
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	defer func() {
		call.Sent = sent.Bytes()
		f.mu.Lock()
		f.calls[i] = call
		f.mu.Unlock()
	}()
	fail := func(e *llm.Error) {
		status, b := f.Codec.EncodeError(e)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = out.Write(b)
	}
	if f.Key != "" && f.presented(r.Header) != f.Key {
		fail(llm.Errorf(llm.ErrorAuthentication, "invalid api key"))
		return
	}
	if strings.HasSuffix(r.URL.Path, "count_tokens") || strings.HasSuffix(r.URL.Path, ":countTokens") {
		tc := f.Codec.(llm.TokenCounter)
		req, err := tc.DecodeCountRequest(body)
		if err != nil {
			fail(llm.AsError(err))
			return
		}
		call.Request = req
		w.Header().Set("Content-Type", "application/json")
		_, _ = out.Write(tc.EncodeCountResponse(42))
		return
	}
	req, err := f.Codec.DecodeRequest(body)
	if err != nil {
		fail(llm.AsError(err))
		return
	}
	if f.Codec.Format() == llm.FormatGemini {
		_, spec, _ := strings.Cut(r.URL.Path, "/models/") // /v1beta/… or /v1/…
		model, method, _ := strings.Cut(spec, ":")
		req.Model, req.Stream = model, method == "streamGenerateContent"
	}
	call.Request, call.Stream = req, req.Stream
	resp, e := f.Answer(req)
	if e != nil {
		fail(e)
		return
	}
	if !req.Stream {
		b, err := f.Codec.EncodeResponse(req, resp)
		if err != nil {
			fail(llm.AsError(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = out.Write(b)
		return
	}
	rc := http.NewResponseController(w)
	var sink llm.SSESink = llm.NewSSEWriter(out)
	if f.Codec.Format() == llm.FormatGemini && r.URL.Query().Get("alt") != "sse" {
		// Gemini streams a JSON array of answers without ?alt=sse.
		w.Header().Set("Content-Type", "application/json")
		array := &jsonArray{w: out}
		defer array.end()
		sink = array
	} else {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	enc := f.Codec.NewStreamEncoder(sink, req)
	evs := llm.ResponseEvents(resp, f.Chunk)
	for i := range evs {
		if err := enc.Encode(&evs[i]); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

// jsonArray writes each event's data as an element of a JSON array, as
// Gemini streams without SSE.
type jsonArray struct {
	w io.Writer
	n int
}

func (a *jsonArray) WriteEvent(_ string, data []byte) error {
	sep := "["
	if a.n > 0 {
		sep = "\n,\r\n"
	}
	a.n++
	_, err := io.WriteString(a.w, sep+string(data))
	return err
}

func (a *jsonArray) end() {
	if a.n == 0 {
		_, _ = io.WriteString(a.w, "[")
	}
	_, _ = io.WriteString(a.w, "]")
}
