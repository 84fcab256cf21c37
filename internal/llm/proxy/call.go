package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/llm/internal/redact"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// call is one client request on its way through the proxy.
type call struct {
	p       *Proxy
	w       *recorder
	rec     Recording // nil when nothing records
	begun   bool
	ended   bool // finish ran
	r       *http.Request
	ctx     context.Context // the client's, bounded by the entry's Timeout
	in      llm.Codec
	count   bool   // a token count, not a generation
	method  string // Gemini: generateContent, streamGenerateContent or countTokens
	version string // Gemini: the API version of the path, v1beta or v1
	body    []byte
	model   string
	stream  bool
	maxOut  int // the output the request asks for at most; 0: unknown
	// stripUsage: the proxy asked a Chat Completions stream for the usage
	// the client did not ask for, and keeps it from the client.
	stripUsage bool
	req        *llm.Request // the canonical request, decoded when first needed
	ex         Exchange
	// abort: the upstream broke off a response the client has part of,
	// which cannot say so; its connection is broken once the exchange is
	// recorded.
	abort bool
	// failed is why the last attempt failed in a way the next may not
	// (attempt returned false); passed are those of the models tried
	// before the one being tried (the last of each), which the call's own
	// error names: a fallback's failure alone would hide why the model
	// asked for did not answer.
	failed *llm.Error
	passed []string
}

func (p *Proxy) handle(f llm.Format, count bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := p.newCall(w, r, f)
		c.count = count
		if !c.readBody() {
			return
		}
		var e *llm.Error
		if c.model, c.stream, c.maxOut, e = peek(f, c.body); e != nil {
			c.fail(e)
			return
		}
		c.run()
		c.end()
	}
}

// end breaks the client's connection when the call must be aborted.
func (c *call) end() {
	if c.abort {
		panic(http.ErrAbortHandler)
	}
}

func (p *Proxy) handleGemini(w http.ResponseWriter, r *http.Request) {
	c := p.newCall(w, r, llm.FormatGemini)
	// The path may hold the client's key (m;key=…, escaped): what an error
	// quotes of it is redacted, for the client's answer is archived.
	spec := r.PathValue("call")
	i := strings.LastIndexByte(spec, ':')
	if i < 0 {
		c.fail(llm.Errorf(llm.ErrorNotFound, "no Gemini method in %q", redact.URL(spec)))
		return
	}
	c.model, c.method = spec[:i], spec[i+1:]
	c.version, _, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch c.method {
	case "generateContent":
	case "streamGenerateContent":
		c.stream = true
	case "countTokens":
		c.count = true
	default:
		c.fail(llm.Errorf(llm.ErrorNotFound, "unknown Gemini method %q", redact.URL(c.method)))
		return
	}
	if c.readBody() {
		c.run()
		c.end()
	}
}

func (p *Proxy) newCall(w http.ResponseWriter, r *http.Request, f llm.Format) *call {
	c := &call{p: p, w: &recorder{ResponseWriter: w}, r: r, ctx: r.Context(), in: Codecs[f]}
	c.ex.Start, c.ex.Inbound = time.Now(), f
	c.ex.Caller = caller.From(r.Context())
	c.w.start = c.ex.Start
	return c
}

func (c *call) readBody() bool {
	body, err := readAll(http.MaxBytesReader(c.w, c.r.Body, MaxBody), c.r.ContentLength)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		c.fail(llm.Errorf(llm.ErrorTooLarge, "request body is larger than %d bytes", MaxBody))
		return false
	case err != nil:
		c.fail(llm.Invalid("read request body: %v", err))
		return false
	}
	c.body = body
	return true
}

// readAll is io.ReadAll into a buffer of the size announced (n, -1 when
// unknown), so that a body of known length is read without the copies of
// a growing buffer.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 || n > MaxBody {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, n+1) // +1: room to see the end without growing
	for {
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: grow
		}
	}
}

// peek reads, without decoding the request (in format f), the two
// members routing needs and the output it asks for at most (max_tokens,
// max_completion_tokens, max_output_tokens), for admission. A stream that
// is no JSON boolean is refused: passed through, an upstream that reads
// "true" or 1 as true would stream what the proxy, taking it for a whole
// answer, could not meter.
func peek(f llm.Format, body []byte) (model string, stream bool, maxOut int, _ *llm.Error) {
	err := wire.Members(body, func(k string, v []byte) error {
		switch k {
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			maxOut = max(maxOut, tokenCount(v))
		case "model":
			if len(v) > 0 && v[0] == '"' {
				model = strings.Trim(string(v), `"`)
				if bytes.IndexByte(v, '\\') >= 0 {
					model = "" // escaped names are not configured names
				}
			}
		case "stream":
			switch string(v) {
			case "true":
				stream = true
			case "false", "null":
				stream = false
			default:
				return llm.Invalid("decode %s request: stream must be true or false, not %.40s", f, v)
			}
		}
		return nil
	})
	var e *llm.Error
	switch {
	case errors.As(err, &e):
		return model, stream, maxOut, e
	case err != nil:
		// Where and what, in plain words; an object not of the
		// members' reading (ErrSyntax) reads as one.
		if e := llm.DecodeRequestJSON(body, new(map[string]json.RawMessage), string(f)); e != nil {
			return model, stream, maxOut, llm.AsError(e)
		}
		return model, stream, maxOut, llm.Invalid("decode %s request: malformed JSON", f)
	}
	return model, stream, maxOut, nil
}

// tokenCount reads v, a JSON number of tokens such as a client's
// max_tokens, in any form JSON writes a number (100, 100.0, 1e2): a
// client that writes it as a float is held to it as one that writes an
// integer. A fraction counts whole; anything else (not a number, not
// above zero) is 0; the count stops at the largest int.
func tokenCount(v []byte) int {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || !(f > 0) {
		return 0
	}
	if f >= math.MaxInt {
		return math.MaxInt
	}
	return int(math.Ceil(f))
}

// estimate is what the call may cost, for its admission (Admitter).
func (c *call) estimate() int64 {
	if c.count {
		return 0
	}
	out := c.maxOut
	if c.in.Format() == llm.FormatGemini {
		out = tokenCount(member(member(c.body, "generationConfig"), "maxOutputTokens"))
	}
	if out <= 0 {
		out = DefaultOutputEstimate
	}
	// A client may ask for as much output as an int holds: the sum
	// stops there rather than wrap to a negative reservation.
	in := int64(min(bytesTokens(len(c.body)), MaxInputEstimate))
	return in + min(int64(out), math.MaxInt64-in)
}

// canonical decodes the client's request once.
func (c *call) canonical() (*llm.Request, *llm.Error) {
	if c.req != nil {
		return c.req, nil
	}
	var req *llm.Request
	var err error
	if tc, ok := c.in.(llm.TokenCounter); ok && c.count {
		req, err = tc.DecodeCountRequest(c.body)
	} else {
		req, err = c.in.DecodeRequest(c.body)
	}
	if err != nil {
		return nil, llm.AsError(err)
	}
	if c.in.Format() == llm.FormatGemini {
		req.Model, req.Stream = c.model, c.stream
	}
	c.req = req
	return req, nil
}

// begin starts the exchange's record, once, before anything goes
// upstream or to the client.
func (c *call) begin() {
	if c.begun || c.p.record == nil {
		return
	}
	c.begun = true
	c.rec = c.p.record.Begin(c.r, c.body, &c.ex)
	c.w.rec = c.rec
}

func (c *call) fail(e *llm.Error) {
	c.begin()
	e = c.withPassed(e)
	c.ex.Err = e
	writeError(c.w, c.in, e)
	c.finish()
}

// finish ends the exchange, once: an attempt that failed the call has
// finished it already.
func (c *call) finish() {
	if c.ended {
		return
	}
	c.ended = true
	c.ex.Status = c.w.status
	c.ex.Duration = time.Since(c.ex.Start)
	if !c.w.first.IsZero() {
		c.ex.FirstByte = c.w.first.Sub(c.ex.Start)
	}
	c.ex.ClientGone = c.w.err != nil || c.r.Context().Err() != nil
	if c.rec != nil {
		c.rec.End(&c.ex)
	}
	if c.p.observe != nil {
		c.p.observe(&c.ex)
	}
}

func (c *call) run() {
	c.ex.Model, c.ex.Stream = c.model, c.stream
	c.begin()
	if c.p.admit != nil {
		if e := c.p.admit(c.r.Context(), &c.ex, c.estimate()); e != nil {
			c.fail(e)
			return
		}
	}
	entry := c.p.models[c.model]
	if entry == nil {
		c.fail(llm.Errorf(llm.ErrorNotFound, "model %q is not configured in the LLM proxy", redact.URL(c.model)))
		return
	}
	if entry.Timeout > 0 {
		var cancel context.CancelFunc
		c.ctx, cancel = context.WithTimeout(c.ctx, entry.Timeout)
		defer cancel()
	}
	candidates := []*Model{entry}
	for _, f := range entry.Fallbacks {
		candidates = append(candidates, c.p.models[f])
	}
	retry := c.p.retry
	for i, m := range candidates {
		wait := retry.Backoff
		for try := 0; ; try++ {
			more := try < retry.Attempts && c.ctx.Err() == nil
			c.ex.Attempts++
			if c.attempt(c.p.providers[m.Provider], m, i == len(candidates)-1 && !more) {
				c.finish()
				return
			}
			if !more || !sleep(c.ctx, jitter(wait)) {
				break
			}
			wait = min(2*wait, max(retry.MaxBackoff, retry.Backoff))
		}
		c.passed = append(c.passed, fmt.Sprintf("model %q: %s", m.Name, c.failed.Message))
	}
	// A wait between tries was cut short: the client left, or the
	// deadline came before the last try could.
	if err := c.r.Context().Err(); err != nil {
		c.ex.Err = err
		c.finish()
		return
	}
	c.fail(llm.Errorf(llm.ErrorTimeout, "model %q: no upstream answered within %v", redact.URL(c.model), entry.Timeout))
}

// sleep waits d, or until ctx ends and then reports false.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// jitter is d less up to a fifth, so that clients told to wait at once do
// not all come back at once.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - rand.N(d/5+1)
}

// attempt calls one candidate. It returns false when the candidate failed
// in a way the next one may not (and nothing was written).
func (c *call) attempt(pr *provider, m *Model, last bool) bool {
	c.ex.Provider, c.ex.Upstream = pr.Name, m.Model
	if pr.codec == nil {
		c.replay(pr, m)
		return true
	}
	out := pr.codec
	pass := out.Format() == c.in.Format()
	c.ex.Passthrough = pass
	if c.count {
		return c.countTokens(pr, m, last)
	}
	var body []byte
	var path string
	if pass && c.in.Format() == llm.FormatResponses && string(member(c.body, "background")) == "true" {
		// Answered at once while the model goes on upstream, its result
		// fetched later (a path the proxy does not serve): nothing of what
		// it costs would pass here to be counted.
		c.fail(llm.Invalid("background responses are not served by the LLM proxy: their tokens could not be counted against its budgets"))
		return true
	}
	if pass {
		body, path = c.passBody(out, m)
	} else {
		req, e := c.canonical()
		if e != nil {
			c.fail(e)
			return true
		}
		if tc, ok := c.in.(llm.TranslationChecker); ok {
			if err := tc.CheckTranslation(req); err != nil {
				c.fail(llm.AsError(err))
				return true
			}
		}
		req.Model = m.Model
		var err error
		if body, err = out.EncodeRequest(req); err != nil {
			c.fail(llm.AsError(err))
			return true
		}
		path = out.Upstream(m.Model, c.stream).Path
	}
	resp, e := c.send(pr, path, body, pass)
	if e != nil {
		if c.r.Context().Err() != nil { // the client left
			c.ex.Err = c.r.Context().Err()
			return true
		}
		if c.timedOut() {
			c.fail(llm.Errorf(llm.ErrorTimeout, "model %q: no answer within the route's timeout", redact.URL(c.model)))
			return true
		}
		if !last {
			return c.tryNext(e)
		}
		c.fail(e)
		return true
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := out.DecodeError(resp.StatusCode, data)
		if e.Retryable() && !last {
			return c.tryNext(e)
		}
		e = c.withPassed(e)
		c.ex.Err = e
		if pass { // the upstream's own error, byte for byte
			copyHeader(c.w.Header(), resp.Header)
			c.w.WriteHeader(resp.StatusCode)
			_, _ = c.w.Write(data)
			return true
		}
		writeError(c.w, c.in, e)
		return true
	}
	switch {
	case pass && c.stream && isSSE(resp.Header):
		c.passStream(out, resp)
	case pass:
		c.passWhole(out, resp)
	default:
		c.translate(out, resp)
	}
	return true
}

// withPassed is e naming how the models tried before failed, if any.
func (c *call) withPassed(e *llm.Error) *llm.Error {
	if len(c.passed) == 0 {
		return e
	}
	named := *e
	named.Message += " (tried before: " + strings.Join(c.passed, "; ") + ")"
	return &named
}

// tryNext notes why an attempt failed in a way the next may not, and
// reports false, as attempt does then.
func (c *call) tryNext(e *llm.Error) bool {
	c.failed = e
	return false
}

// passBody is the client's body for an upstream of its format: the model
// renamed, every other byte as it came.
func (c *call) passBody(out llm.Codec, m *Model) ([]byte, string) {
	if out.Format() == llm.FormatGemini {
		return c.body, "/" + c.version + "/models/" + url.PathEscape(m.Model) + ":" + c.method
	}
	body, _ := wire.ReplaceModel(c.body, m.Model)
	if c.count {
		return body, out.(llm.TokenCounter).CountPath(m.Model)
	}
	if out.Format() == llm.FormatOpenAI && c.stream {
		body, c.stripUsage = askUsage(body)
	}
	return body, out.Upstream(m.Model, c.stream).Path
}

// askUsage returns a Chat Completions stream request that asks for the
// usage chunk (stream_options.include_usage), and whether the client had
// not asked: without it the stream says nothing of what it cost.
func askUsage(body []byte) ([]byte, bool) {
	opts := member(body, "stream_options")
	if string(member(opts, "include_usage")) == "true" {
		return body, false
	}
	withUsage, ok := wire.SetMember(opts, "include_usage", []byte("true"))
	if !ok { // absent or null
		withUsage = []byte(`{"include_usage":true}`)
	}
	if out, ok := wire.SetMember(body, "stream_options", withUsage); ok {
		return out, true
	}
	return body, false
}

// member is the raw value of data's top-level member key (the last, as
// encoding/json takes it), nil when data is no object or has none.
func member(data []byte, key string) []byte {
	var v []byte
	_ = wire.Members(data, func(k string, value []byte) error {
		if k == key {
			v = value
		}
		return nil
	})
	return v
}

// Headers never passed on: the client's credentials, hop-by-hop ones, and
// what the transport sets itself.
var dropRequest = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "X-Goog-Api-Key": true, "Api-Key": true, "Cookie": true,
	"Host": true, "Content-Length": true, "Accept-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Proxy-Authorization": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true,
}

// detachedTimeout bounds the wait for the answer to a whole call whose
// client left, when its entry sets no timeout.
const detachedTimeout = 10 * time.Minute

// cancelOnClose releases a response's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// accountHeaders choose, for a key that reaches more than one, the
// organisation, project or account a call is billed to and whose data and
// limits it uses (OpenAI's organisation and project, the ChatGPT account
// Codex names, Google's quota project). With the operator's key, that is
// the operator's to choose: a client's pass only where its provider's
// ForwardHeaders name them. Other headers pass (anthropic-beta,
// OpenAI-Beta: features, not accounts). Keys are canonical.
var accountHeaders = map[string]bool{
	"Openai-Organization": true, "Openai-Project": true, "Chatgpt-Account-Id": true, "X-Goog-User-Project": true,
}

// CheckForwardHeader checks a name for Provider.ForwardHeaders: a header
// name, and not one the proxy never passes on (a credential, a hop-by-hop
// header).
func CheckForwardHeader(name string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("forward_headers: %q is not a header name", name)
	}
	if dropRequest[http.CanonicalHeaderKey(name)] {
		return fmt.Errorf("forward_headers: %s is never passed on: the proxy sets it, or it is the client's credential", name)
	}
	return nil
}

func (c *call) send(pr *provider, path string, body []byte, pass bool) (resp *http.Response, _ *llm.Error) {
	u := strings.TrimRight(pr.BaseURL, "/") + path
	if pass && c.r.URL.RawQuery != "" {
		// Keep the client's query (?beta=true, ?alt=sse), but never its key.
		q := c.r.URL.Query()
		q.Del("key")
		if enc := q.Encode(); enc != "" {
			base, _, _ := strings.Cut(u, "?")
			u = base + "?" + enc
		}
	}
	if err := c.r.Context().Err(); err != nil { // nothing new for a client gone
		return nil, llm.Errorf(llm.ErrorUpstream, "call provider %s: %v", pr.Name, err)
	}
	ctx := c.ctx
	if !c.stream && !c.count {
		// An upstream answers a whole call it was sent, and bills it,
		// whether or not its caller is still there: a client that left
		// early would otherwise be charged nothing. The answer is read to
		// its end, within the entry's timeout (or detachedTimeout).
		d, ok := ctx.Deadline()
		if !ok {
			d = time.Now().Add(detachedTimeout)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
		defer func() {
			if resp == nil {
				cancel()
			} else {
				resp.Body = cancelOnClose{resp.Body, cancel}
			}
		}()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, llm.Errorf(llm.ErrorInternal, "call provider %s: %v", pr.Name, hideURL(err))
	}
	if pass {
		for k, v := range c.r.Header {
			if !dropRequest[k] && (!accountHeaders[k] || pr.forward[k]) {
				hreq.Header[k] = v
			}
		}
	} else if ua := c.r.Header.Get("User-Agent"); ua != "" {
		hreq.Header.Set("User-Agent", ua)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	pr.codec.Upstream(c.ex.Upstream, c.stream).SetKey(hreq.Header, pr.APIKey)
	if c.rec != nil {
		c.rec.UpstreamRequest(hreq, body)
	}
	resp, err = c.p.client.Do(hreq)
	if err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "call provider %s: %v", pr.Name, hideURL(err))
	}
	if c.rec != nil {
		c.rec.UpstreamResponse(resp.StatusCode, resp.Header)
		resp.Body = &recordedBody{ReadCloser: resp.Body, rec: c.rec}
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Not followed (NewClient): it would take the provider's key along.
		resp.Body.Close()
		return nil, llm.Errorf(llm.ErrorUpstream, "call provider %s: it answered %d, a redirect to %q, which the LLM proxy does not follow (check the provider's base_url)",
			pr.Name, resp.StatusCode, redact.URL(resp.Header.Get("Location")))
	}
	return resp, nil
}

// hideURL redacts the URL a *url.Error quotes (with the client's query,
// which may hold a credential): the message goes to the client and the
// archive.
func hideURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact.URL(ue.URL)
	}
	return err
}

// recordedBody hands each piece of an upstream's body to the recording as
// it is read.
type recordedBody struct {
	io.ReadCloser
	rec Recording
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.rec.UpstreamData(p[:n])
	}
	return n, err
}

var dropResponse = map[string]bool{
	"Content-Length": true, "Content-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Transfer-Encoding": true, "Set-Cookie": true,
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		if !dropResponse[k] {
			dst[k] = v
		}
	}
}

// passWhole forwards an answer that is not a stream of events: a whole
// one, or one a stream was asked for that streams without SSE (Gemini's
// streamGenerateContent without alt=sse: a JSON array whose elements come
// as they are made), each piece flushed as it comes.
//
// A whole answer is read to its end before any of it is sent: one the
// upstream broke off is the client's 502 (504 past the route's timeout) in
// its own format, not a part passed off as the whole; so is one that only
// its connection's close delimits (no Content-Length, not chunked), cut
// midway, whose end looks like any other: declared JSON, it does not
// parse (wholeJSON). A stream that breaks off breaks the client's
// connection too (abort), as the upstream's did.
func (c *call) passWhole(out llm.Codec, resp *http.Response) {
	var data []byte
	var err error
	if c.stream {
		copyHeader(c.w.Header(), resp.Header)
		c.w.WriteHeader(resp.StatusCode)
		data, err = c.copyFlushing(resp.Body)
		c.abort = err != nil && c.w.err == nil && c.r.Context().Err() == nil
	} else {
		data, err = readAll(resp.Body, resp.ContentLength)
		if err == nil {
			err = wholeJSON(resp.Header, data)
		}
		if err == nil {
			copyHeader(c.w.Header(), resp.Header)
			c.w.WriteHeader(resp.StatusCode)
			_, _ = c.w.Write(data)
		}
	}
	if err != nil {
		c.ex.Err = err
	}
	if c.p.watched() {
		u, r := answerUsage(out, data)
		if r == nil && u.OutputTokens == 0 {
			// No byte of it decodes (an upstream that streamed what was
			// asked whole): all of them, as a body only the upstream
			// reads is charged.
			u.OutputTokens = bytesTokens(len(data))
			c.ex.UsageEstimated = true
		}
		c.charge(u, r, err == nil)
	}
	if err != nil && !c.stream {
		c.fail(c.brokeOff(err))
	}
}

// wholeJSON checks that a whole answer whose header declares it JSON is
// JSON: one that is not was cut short (its connection closed midway, when
// only the close delimits it), or is no answer its client could read.
func wholeJSON(h http.Header, data []byte) error {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if (mt == "application/json" || strings.HasSuffix(mt, "+json")) && !json.Valid(data) {
		return fmt.Errorf("its body, declared JSON, is not whole JSON after %d bytes: its connection closed midway, or it sent no JSON", len(data))
	}
	return nil
}

// brokeOff is the error of an upstream's answer that broke off with err:
// a 504 when the route's timeout ended it, else a 502.
func (c *call) brokeOff(err error) *llm.Error {
	if c.timedOut() {
		return llm.Errorf(llm.ErrorTimeout, "model %q: the answer did not end within the route's timeout", redact.URL(c.model))
	}
	return llm.Errorf(llm.ErrorUpstream, "the answer of provider %s broke off: %v", c.ex.Provider, hideURL(err))
}

// timedOut says the route's timeout has come. The context of a whole
// call's upstream request has the same deadline but a timer of its own
// (send): its error may come before c.ctx's.
func (c *call) timedOut() bool {
	d, ok := c.ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// bytesTokens estimates the tokens of n bytes the proxy cannot decode
// (llm.BytesPerToken).
func bytesTokens(n int) int { return (n + llm.BytesPerToken - 1) / llm.BytesPerToken }

// copyFlushing copies an upstream's body to the client, flushing each
// piece, and returns it when someone watches.
func (c *call) copyFlushing(body io.Reader) ([]byte, error) {
	var data []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if c.p.watched() {
				data = append(data, buf[:n]...)
			}
			if _, werr := c.w.Write(buf[:n]); werr != nil {
				return data, werr
			}
			c.w.Flush()
		}
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// answerUsage is the usage of an answer that is not a stream of events,
// and, when that is not all there (an upstream that counts nothing), the
// answer decoded for an estimate: a whole answer, or a JSON array of them
// (Gemini's stream without SSE, whose last count is the call's); nil when
// none of it decodes.
func answerUsage(out llm.Codec, data []byte) (llm.Usage, *llm.Response) {
	u := usageOf(out, data)
	if u.InputTokens > 0 && u.OutputTokens > 0 {
		return u, nil
	}
	if r, err := out.DecodeResponse(data); err == nil {
		return u, r
	}
	var all *llm.Response
	_ = wire.Elements(data, func(_ int, v []byte) error {
		if r, err := out.DecodeResponse(v); err == nil {
			if all == nil {
				all = &llm.Response{}
			}
			all.Content = append(all.Content, r.Content...)
			if r.Usage != (llm.Usage{}) {
				all.Usage = r.Usage
			}
		}
		return nil
	})
	if all == nil {
		return u, nil
	}
	return all.Usage, all
}

// charge sets the exchange's usage: what the upstream counted, and an
// estimate (Exchange.UsageEstimated) of what it did not: the input from
// the request, the output from r, what the client was sent. An answer that
// did not complete (the client left, the upstream broke off) is charged at
// least what was sent, whatever the upstream said at its start (Anthropic's
// message_start counts an output token or so). The estimates are rough
// (llm.EstimateTokens): they only keep budgets from being dodged by calls
// whose count never came.
func (c *call) charge(u llm.Usage, r *llm.Response, complete bool) {
	if u.InputTokens == 0 {
		if req, e := c.canonical(); e == nil {
			u.InputTokens = llm.EstimateTokens(req)
		} else { // a body only the upstream reads: all of it
			u.InputTokens = bytesTokens(len(c.body))
		}
		c.ex.UsageEstimated = true
	}
	if r != nil && (u.OutputTokens == 0 || !complete) {
		if n := llm.EstimateOutputTokens(r); n > u.OutputTokens {
			u.OutputTokens = n
			c.ex.UsageEstimated = true
		}
	}
	c.ex.Usage = u
}

// usageOf reads the usage of a whole answer in out's format: the codec
// decodes only its usage member (usage, usageMetadata) — by itself when it
// can (llm.UsageDecoder), else in an answer of nothing else — and the whole
// answer only when that fails.
func usageOf(out llm.Codec, data []byte) llm.Usage {
	if ud, ok := out.(llm.UsageDecoder); ok {
		if m := member(data, "usage"); m != nil {
			if u, err := ud.DecodeUsage(m); err == nil {
				return u
			}
		}
	}
	if small := usageMember(data); small != nil {
		if r, err := out.DecodeResponse(small); err == nil {
			return r.Usage
		}
	}
	if r, err := out.DecodeResponse(data); err == nil {
		return r.Usage
	}
	return llm.Usage{}
}

// usageMember is data's usage member in an answer of one empty choice
// (which the codecs of Chat Completions and Gemini want), nil when data
// has none.
func usageMember(data []byte) []byte {
	var small []byte
	_ = wire.Members(data, func(k string, v []byte) error {
		if k == "usage" || k == "usageMetadata" {
			small = append(append(append(append(small[:0], emptyAnswer...), k...), `":`...), v...)
			small = append(small, '}')
		}
		return nil
	})
	return small
}

const emptyAnswer = `{"choices":[{"index":0,"message":{"role":"assistant"}}],"candidates":[{"content":{"parts":[]}}],"`

// watched says someone wants each exchange's usage, which pass-through
// reads from the answer on the way.
func (p *Proxy) watched() bool { return p.observe != nil || p.record != nil }

// passStream forwards the upstream's stream event by event, each flushed as
// it arrives, and reads the usage from it on the way when someone watches.
func (c *call) passStream(out llm.Codec, resp *http.Response) {
	copyHeader(c.w.Header(), resp.Header)
	c.w.WriteHeader(resp.StatusCode)
	// The header leaves with the first event, in one write (as a
	// translated stream's does), not in a write of its own before it.
	tee := &teeSource{src: llm.NewSSEReader(resp.Body), w: c.w, stripUsage: c.stripUsage}
	// unended: the upstream's stream came to its end without its end
	// event (a connection closed early, where nothing but the close
	// delimited the body), as the decoder sees it once every byte is read.
	var unended *llm.Error
	if c.p.watched() {
		var acc llm.Accumulator
		dec := out.NewStreamDecoder(tee)
		var err error
		for {
			var ev llm.Event
			if ev, err = dec.Next(); err != nil {
				// Otherwise not ours to judge: the bytes went through as
				// they were.
				if !errors.Is(err, io.EOF) && errors.Is(tee.err, io.EOF) {
					unended = llm.AsError(err)
				}
				break
			}
			acc.Add(&ev)
		}
		r := acc.Response()
		c.charge(r.Usage, r, errors.Is(err, io.EOF) && acc.Ended())
	}
	for tee.err == nil { // whatever the decoder did not read
		_, _ = tee.Next()
	}
	var broke *llm.Error
	switch {
	case !errors.Is(tee.err, io.EOF):
		c.ex.Err, broke = tee.err, c.brokeOff(tee.err)
	case unended != nil:
		c.ex.Err, broke = unended, unended
	}
	if broke != nil && c.w.err == nil && c.r.Context().Err() == nil {
		// The upstream broke off (or its timeout came), not the client:
		// the stream ends with an error event in the client's format, as
		// a translated one does, not with a clean end after a part of the
		// answer.
		enc := c.in.NewStreamEncoder(llm.NewSSEWriter(c.w), c.req)
		if enc.Encode(&llm.Event{Type: llm.EventError, Err: broke}) == nil {
			c.w.Flush()
		}
	}
}

// teeSource writes each event to the client as the decoder reads it,
// flushed unless the next one is already here.
type teeSource struct {
	src *llm.SSEReader
	w   *recorder
	// stripUsage: the client did not ask for the usage its stream was
	// asked for (see withoutUsage).
	stripUsage bool
	buf        []byte
	err        error
	flushed    bool // once
}

func (t *teeSource) Next() (llm.SSEEvent, error) {
	if t.err != nil {
		return llm.SSEEvent{}, t.err
	}
	ev, err := t.src.Next()
	if err != nil {
		t.err = err
		return ev, err
	}
	raw := ev.Raw
	if t.stripUsage {
		raw = t.withoutUsage(ev)
	}
	if len(raw) > 0 {
		if _, err := t.w.Write(raw); err != nil {
			t.err = err
			return llm.SSEEvent{}, err
		}
	}
	// Events that came together leave together: one flush after the last
	// of them (an upstream that bursts costs one write(2), not one each).
	// The first leaves at once, whatever follows it: the time to the first
	// event is what a client waits on.
	if !t.flushed || !t.src.Ready() {
		t.w.Flush()
		t.flushed = true
	}
	return ev, nil
}

// withoutUsage is a Chat Completions stream's event as it would have come
// had the proxy not asked for usage: OpenAI then sends no chunk of usage
// alone (no choices, a usage) and no "usage": null in every other one.
// Empty drops the event.
func (t *teeSource) withoutUsage(ev llm.SSEEvent) []byte {
	data := bytes.TrimSpace(ev.Data)
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return ev.Raw
	}
	var usage, choices []byte
	if wire.Members(data, func(k string, v []byte) error {
		switch k {
		case "usage":
			usage = v
		case "choices":
			choices = v
		}
		return nil
	}) != nil || usage == nil {
		return ev.Raw
	}
	if string(usage) != "null" {
		n := 0
		_ = wire.Elements(choices, func(int, []byte) error { n++; return nil })
		if n == 0 {
			return nil
		}
		return ev.Raw // a count some servers put on a chunk of content
	}
	i := bytes.Index(ev.Raw, data)
	stripped, ok := wire.DeleteMember(data, "usage")
	if i < 0 || !ok {
		return ev.Raw
	}
	t.buf = append(append(append(t.buf[:0], ev.Raw[:i]...), stripped...), ev.Raw[i+len(data):]...)
	return t.buf
}

func isSSE(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// translate answers the client in its format from an upstream of another.
func (c *call) translate(out llm.Codec, resp *http.Response) {
	req := c.req
	if !c.stream || !isSSE(resp.Header) {
		data, err := io.ReadAll(resp.Body)
		if err == nil {
			err = wholeJSON(resp.Header, data)
		}
		if err != nil {
			c.fail(c.brokeOff(err))
			return
		}
		r, err := out.DecodeResponse(data)
		if err != nil {
			c.fail(llm.AsError(err))
			return
		}
		c.charge(r.Usage, r, true)
		if c.stream { // an upstream that would not stream: stream it ourselves
			_, _ = c.streamEvents(&llm.SliceDecoder{Events: llm.ResponseEvents(r, 0)})
			return
		}
		body, err := c.in.EncodeResponse(req, r)
		if err != nil {
			c.fail(llm.AsError(err))
			return
		}
		c.w.Header().Set("Content-Type", "application/json")
		c.w.WriteHeader(http.StatusOK)
		_, _ = c.w.Write(body)
		return
	}
	r, err := c.streamEvents(timeoutDecoder{out.NewStreamDecoder(llm.NewSSEReader(resp.Body)), c})
	c.charge(r.Usage, r, err == nil)
}

// timeoutDecoder says that a stream the route's timeout ended did, not
// that reading it failed.
type timeoutDecoder struct {
	llm.StreamDecoder
	c *call
}

func (d timeoutDecoder) Next() (llm.Event, error) {
	ev, err := d.StreamDecoder.Next()
	if err != nil && !errors.Is(err, io.EOF) && d.c.timedOut() {
		err = d.c.brokeOff(err)
	}
	return ev, err
}

// streamEvents streams dec's events to the client, and returns the
// response they amount to and how the stream ended.
func (c *call) streamEvents(dec llm.StreamDecoder) (*llm.Response, error) {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.w.WriteHeader(http.StatusOK)
	enc := c.in.NewStreamEncoder(llm.NewSSEWriter(c.w), c.req)
	r, err := llm.Pump(dec, enc, func() error { c.w.Flush(); return nil })
	if err != nil {
		c.ex.Err = err
	}
	return r, err
}

// replay answers from a script in the client's format.
func (c *call) replay(pr *provider, m *Model) {
	req, e := c.canonical()
	if e != nil {
		c.fail(e)
		return
	}
	if c.count {
		c.writeCount(llm.EstimateTokens(req))
		return
	}
	req.Model = m.Model
	r, err := pr.Script.Answer(req)
	if err != nil {
		c.fail(llm.AsError(err))
		return
	}
	c.ex.Usage = r.Usage
	if c.stream {
		_, _ = c.streamEvents(&llm.SliceDecoder{Events: llm.ResponseEvents(r, 16)})
		return
	}
	body, err := c.in.EncodeResponse(req, r)
	if err != nil {
		c.fail(llm.AsError(err))
		return
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(body)
}

// countTokens asks an upstream that can count, in its format, and
// estimates for those that cannot.
func (c *call) countTokens(pr *provider, m *Model, last bool) bool {
	counter, ok := pr.codec.(llm.TokenCounter)
	req, e := c.canonical()
	if e != nil {
		c.fail(e)
		return true
	}
	if !ok {
		c.writeCount(llm.EstimateTokens(req))
		return true
	}
	req.Model = m.Model
	body, err := counter.EncodeCountRequest(req)
	if err != nil {
		c.fail(llm.AsError(err))
		return true
	}
	resp, e := c.send(pr, counter.CountPath(m.Model), body, false)
	if e != nil {
		if !last {
			return c.tryNext(e)
		}
		c.fail(e)
		return true
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		e := pr.codec.DecodeError(resp.StatusCode, data)
		if e.Retryable() && !last {
			return c.tryNext(e)
		}
		c.fail(e)
		return true
	}
	n, err := counter.DecodeCountResponse(data)
	if err != nil {
		c.fail(llm.AsError(err))
		return true
	}
	c.writeCount(n)
	return true
}

// writeCount answers a token count. The count is no usage: an upstream
// bills nothing for it, so the exchange is charged nothing (budgets, a
// run's tokens).
func (c *call) writeCount(n int) {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(c.in.(llm.TokenCounter).EncodeCountResponse(n))
}

// recorder notes the status, the time of the first byte written and the
// first write error (a client gone), and hands what it writes to the
// exchange's Recording.
type recorder struct {
	http.ResponseWriter
	start  time.Time
	first  time.Time
	status int
	err    error
	rec    Recording
	rc     *http.ResponseController
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
		if r.rec != nil {
			r.rec.Response(status, r.Header())
		}
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.first.IsZero() {
		r.first = time.Now()
	}
	n, err := r.ResponseWriter.Write(b)
	if r.rec != nil && n > 0 {
		r.rec.ResponseData(b[:n])
	}
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// Flush sends what was written; errors (a client gone) show on the next
// Write.
func (r *recorder) Flush() {
	if r.rc == nil {
		r.rc = http.NewResponseController(r.ResponseWriter)
	}
	_ = r.rc.Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
