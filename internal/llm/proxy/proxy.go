// Package proxy is the LLM proxy's routing and provider layer, as a plain
// http.Handler: it serves the four inbound wire formats (paths relative to
// the proxy's base, e.g. /llm), picks the configured model entry, and
// calls its provider — passing the request through untouched when the
// provider speaks the client's format (only the key and the model name
// change, and streams are copied event by event as they arrive), or
// translating through the canonical model otherwise, or answering from a
// replay script. Rate limits, server errors and connection failures are
// retried with exponential back-off, then fall back to the entry's
// fallbacks, as long as nothing was sent to the client; an entry's Timeout
// bounds the whole call, retries and fallbacks included. A Recorder sees
// every part of an exchange as it passes.
//
// It knows nothing of the daemon: who the caller is, the archive, budgets
// and configuration files are the caller's (see Observer and Recorder). A
// Proxy is safe for concurrent use; its configuration is fixed at New.
package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/openai"
	"github.com/agent2env/agent2env/internal/llm/replay"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

// TypeReplay is the provider type that answers from a replay script.
const TypeReplay = "replay"

// Provider is an upstream.
type Provider struct {
	Name string
	// Type is a wire format (openai, openai-responses, anthropic, gemini)
	// or replay.
	Type string
	// BaseURL: ending in /v1 for the OpenAI formats, host-only for
	// Anthropic and Gemini, as the providers' SDKs take it.
	BaseURL string
	APIKey  string
	// ForwardHeaders are the account-selecting headers (OpenAI-Organization,
	// OpenAI-Project, ChatGPT-Account-ID, X-Goog-User-Project) a client may
	// send this provider with the operator's key, on pass-through; the
	// others are dropped.
	ForwardHeaders []string
	// Script answers for a replay provider.
	Script *replay.Script
}

// Model is an entry clients ask for by Name.
type Model struct {
	Name     string
	Provider string
	// Model is the upstream's name for it; empty means Name.
	Model string
	// Fallbacks are other entries tried, in order, when this one's
	// provider answers 429 or 5xx or cannot be reached.
	Fallbacks []string
	// Timeout bounds a call that asked for this entry, retries and
	// fallbacks included, until its response ends; zero means none.
	Timeout time.Duration
}

// Config is the proxy's providers and models.
type Config struct {
	Providers []Provider
	Models    []Model
	// Retry is how often an upstream that answered 429 or 5xx, or could
	// not be reached, is tried again before the fallbacks.
	Retry Retry
}

// Retry is a retry policy: Attempts more tries of the same entry, waiting
// Backoff before the first, doubling each time up to MaxBackoff (with
// jitter), never past the call's Timeout. The zero value never retries.
type Retry struct {
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Exchange describes one call through the proxy, for the Observer.
type Exchange struct {
	// Caller is who made the call, from the request's context.
	Caller caller.Caller
	// ID is the archive's id of the exchange, set by a Recorder's Begin;
	// empty without one.
	ID       string
	Inbound  llm.Format
	Model    string // the entry the client asked for
	Provider string // the provider that answered (after fallbacks)
	Upstream string // the upstream's model name
	Stream   bool
	// Passthrough: the body went through as the client sent it, but for
	// the model's name and a Chat Completions stream's request for usage.
	Passthrough bool
	Status      int
	// Reserved is what the Admitter reserved of the call's Estimate
	// against its caller's budgets, for the Observer to release when it
	// charges the call's usage; 0 for a call not admitted.
	Reserved int64
	// Usage is what the call is charged: the upstream's count, with an
	// estimate where it gave none (UsageEstimated).
	Usage          llm.Usage
	UsageEstimated bool
	Err            error
	Attempts       int
	Start          time.Time
	FirstByte      time.Duration // to the first byte sent to the client
	Duration       time.Duration
	// ClientGone: the client left (or could no longer be written to)
	// before the exchange ended.
	ClientGone bool
}

// Recorder is told of every exchange as it happens, for the archive: Begin
// once the client's request is read, before anything is forwarded. Begin
// runs on the request's goroutine and must not block on a disk.
type Recorder interface {
	// Begin starts the record of the request r, whose body the proxy has
	// read as body (never modified afterwards: the recorder may keep it),
	// and may set ex.ID. It returns nil to record nothing.
	Begin(r *http.Request, body []byte, ex *Exchange) Recording
}

// Recording receives the parts of one exchange in the order they pass,
// all from the request's goroutine, then End. Byte slices are only valid
// during the call. Its methods must not block on a disk.
type Recording interface {
	// UpstreamRequest is a request about to be sent upstream (once per
	// attempt: fallbacks make more).
	UpstreamRequest(r *http.Request, body []byte)
	// UpstreamResponse is the status and header of an upstream's answer;
	// UpstreamData each piece of its body as it is read.
	UpstreamResponse(status int, h http.Header)
	UpstreamData(b []byte)
	// Response is the status and header sent to the client, ResponseData
	// each piece of the body as it is written.
	Response(status int, h http.Header)
	ResponseData(b []byte)
	// End closes the record with the exchange's outcome.
	End(ex *Exchange)
}

// Observer is told of every exchange when it ends. It runs on the request's
// goroutine: it must not block.
type Observer func(*Exchange)

// Admitter decides whether a call may go on, once its request is read and
// its record begun, before anything goes upstream: nil, or the error to
// refuse it with (a limit it would pass), which is recorded and observed
// as its end. estimate is what the call may cost in tokens: its input
// (the body's bytes, llm.BytesPerToken, at most MaxInputEstimate) and the
// output it asks for at most (max_tokens and its kin; DefaultOutputEstimate
// when it sets none); 0 for a token count. What the Admitter reserves of
// it, it sets in ex.Reserved. ctx is the request's. It runs on the
// request's goroutine and must not
// block long.
type Admitter func(ctx context.Context, ex *Exchange, estimate int64) *llm.Error

// Bounds of a call's estimate (Admitter).
const (
	// MaxInputEstimate bounds the input estimated from a body's bytes:
	// images inline are many bytes and few tokens.
	MaxInputEstimate = 200_000
	// DefaultOutputEstimate is the output of a call that sets no bound.
	DefaultOutputEstimate = 4096
)

// Option configures a Proxy.
type Option func(*Proxy)

// WithHTTPClient sets the client that calls upstreams. It must follow no
// redirects (see NewClient).
func WithHTTPClient(c *http.Client) Option { return func(p *Proxy) { p.client = c } }

// WithObserver sets the exchange observer.
func WithObserver(o Observer) Option { return func(p *Proxy) { p.observe = o } }

// WithAdmitter sets what admits each call (budgets, rate limits).
func WithAdmitter(a Admitter) Option { return func(p *Proxy) { p.admit = a } }

// WithRecorder sets the recorder of every exchange (the archive).
func WithRecorder(r Recorder) Option { return func(p *Proxy) { p.record = r } }

// MaxBody bounds a request body (images travel inline, base64).
const MaxBody = 64 << 20

// Proxy is the handler.
type Proxy struct {
	providers map[string]*provider
	models    map[string]*Model
	names     []string
	client    *http.Client
	observe   Observer
	admit     Admitter
	retry     Retry
	record    Recorder
	mux       *http.ServeMux
}

type provider struct {
	Provider
	codec   llm.Codec       // nil for replay
	forward map[string]bool // ForwardHeaders, canonical
}

// Codecs are the codecs by format.
var Codecs = map[llm.Format]llm.Codec{
	llm.FormatOpenAI:    openai.Codec{},
	llm.FormatResponses: responses.Codec{},
	llm.FormatAnthropic: anthropic.Codec{},
	llm.FormatGemini:    gemini.Codec{},
}

// DefaultTransport keeps enough idle connections per upstream for a
// thousand requests a second.
func DefaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 512
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// NewClient returns a client for upstreams: DefaultTransport's
// connections, and no redirect followed. A redirect would send the
// request again, provider key included, wherever it points (Go keeps
// x-api-key and x-goog-api-key across hosts): an upstream's 3xx fails the
// call instead (send).
func NewClient() *http.Client {
	return &http.Client{Transport: DefaultTransport(), CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// New checks cfg and returns its proxy.
func New(cfg Config, opts ...Option) (*Proxy, error) {
	p := &Proxy{providers: map[string]*provider{}, models: map[string]*Model{}, retry: cfg.Retry}
	for i := range cfg.Providers {
		pr := &provider{Provider: cfg.Providers[i], forward: map[string]bool{}}
		if pr.Name == "" {
			return nil, fmt.Errorf("llm proxy: provider %d has no name", i+1)
		}
		for _, h := range pr.ForwardHeaders {
			if err := CheckForwardHeader(h); err != nil {
				return nil, fmt.Errorf("llm proxy: provider %q: %w", pr.Name, err)
			}
			pr.forward[http.CanonicalHeaderKey(h)] = true
		}
		if p.providers[pr.Name] != nil {
			return nil, fmt.Errorf("llm proxy: provider %q twice", pr.Name)
		}
		switch {
		case pr.Type == TypeReplay:
			if pr.Script == nil {
				return nil, fmt.Errorf("llm proxy: replay provider %q has no script", pr.Name)
			}
		case Codecs[llm.Format(pr.Type)] != nil:
			pr.codec = Codecs[llm.Format(pr.Type)]
			if pr.BaseURL == "" {
				return nil, fmt.Errorf("llm proxy: provider %q has no base_url", pr.Name)
			}
		default:
			return nil, fmt.Errorf("llm proxy: provider %q: unknown type %q (want openai, openai-responses, anthropic, gemini or replay)", pr.Name, pr.Type)
		}
		p.providers[pr.Name] = pr
	}
	for i := range cfg.Models {
		m := cfg.Models[i]
		if m.Name == "" {
			return nil, fmt.Errorf("llm proxy: model %d has no name", i+1)
		}
		if p.models[m.Name] != nil {
			return nil, fmt.Errorf("llm proxy: model %q twice", m.Name)
		}
		if p.providers[m.Provider] == nil {
			return nil, fmt.Errorf("llm proxy: model %q: unknown provider %q", m.Name, m.Provider)
		}
		if m.Model == "" {
			m.Model = m.Name
		}
		p.models[m.Name] = &m
		p.names = append(p.names, m.Name)
	}
	for _, m := range p.models {
		for _, f := range m.Fallbacks {
			if p.models[f] == nil {
				return nil, fmt.Errorf("llm proxy: model %q: unknown fallback %q", m.Name, f)
			}
		}
	}
	for _, o := range opts {
		o(p)
	}
	if p.client == nil {
		p.client = NewClient()
	}
	p.routes()
	return p, nil
}

func (p *Proxy) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", p.handle(llm.FormatOpenAI, false))
	mux.HandleFunc("POST /v1/responses", p.handle(llm.FormatResponses, false))
	mux.HandleFunc("POST /v1/messages", p.handle(llm.FormatAnthropic, false))
	mux.HandleFunc("POST /v1/messages/count_tokens", p.handle(llm.FormatAnthropic, true))
	// Gemini clients use either API version (gemini-cli v1beta, the Python
	// SDK v1).
	mux.HandleFunc("POST /v1beta/models/{call}", p.handleGemini)
	mux.HandleFunc("POST /v1/models/{call}", p.handleGemini)
	mux.HandleFunc("GET /v1/models", p.listModels)
	mux.HandleFunc("GET /v1beta/models", p.listGeminiModels)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, Codecs[guessFormat(r)], llm.Errorf(llm.ErrorNotFound, "no LLM endpoint %s %s", r.Method, r.URL.Path))
	})
	p.mux = mux
}

// ServeHTTP implements http.Handler. Mount it with http.StripPrefix under
// the proxy's base.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

func writeError(w http.ResponseWriter, c llm.Codec, e *llm.Error) {
	status, body := c.EncodeError(e)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Round(time.Second)/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError answers r with e in the wire format of its client, told by
// its path (relative to the proxy's base) and headers: for those who
// answer for the proxy before it runs.
func WriteError(w http.ResponseWriter, r *http.Request, e *llm.Error) {
	writeError(w, Codecs[guessFormat(r)], e)
}

// Refuse answers r with e as WriteError does, and records and observes it
// as an exchange that went nowhere, without reading its body: for a call
// refused before its request is read (a key that is not valid).
func (p *Proxy) Refuse(w http.ResponseWriter, r *http.Request, e *llm.Error) {
	p.newCall(w, r, guessFormat(r)).fail(e)
}

// guessFormat is the format of a request's client, for errors answered
// before routing: by its path and headers.
func guessFormat(r *http.Request) llm.Format {
	switch {
	case r.URL.Path == "/v1/chat/completions":
		return llm.FormatOpenAI
	case r.URL.Path == "/v1/responses":
		return llm.FormatResponses
	case strings.HasPrefix(r.URL.Path, "/v1/messages"):
		return llm.FormatAnthropic
	case strings.HasPrefix(r.URL.Path, "/v1beta/") || strings.Contains(r.URL.Path, ":") || r.Header.Get("x-goog-api-key") != "":
		return llm.FormatGemini
	case r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "":
		return llm.FormatAnthropic
	}
	return llm.FormatOpenAI
}
