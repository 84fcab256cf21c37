package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

func newKeys(t *testing.T) *gate.Keys {
	t.Helper()
	return gate.NewKeys(keyStore(t))
}

// keyStore is a store of keys in memory, closed when t ends.
func keyStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestKeys(t *testing.T) {
	ctx := context.Background()
	keys := newKeys(t)
	bad := []api.LLMKeyRequest{
		{BudgetTokens: -1}, {RequestsPerMinute: -1}, {TokensPerMinute: -2},
		{ExpiresIn: -5}, {ExpiresIn: int(gate.MaxKeyTTL.Seconds()) + 1}, {Name: strings.Repeat("x", 300)},
		// In nanoseconds these overflow: negative, and 0.29 s.
		{ExpiresIn: 9223372037}, {ExpiresIn: 18446744074},
	}
	for _, req := range bad {
		// The message goes out as the API's, which the client prefixes
		// with what it asked: it does not name that itself.
		if _, err := keys.Create(ctx, req); !errors.Is(err, errdefs.ErrInvalidArgument) || strings.Contains(err.Error(), "create llm key") {
			t.Errorf("Create(%+v) = %v, want ErrInvalidArgument not naming the request", req, err)
		}
	}
	k, err := keys.Create(ctx, api.LLMKeyRequest{Name: "ci", Run: "run-1", BudgetTokens: 100, ExpiresIn: 60})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.Key, gate.KeyPrefix) || k.ExpiresAt.Sub(k.CreatedAt) != time.Minute {
		t.Errorf("created %+v", k)
	}
	rec, err := keys.Authenticate(ctx, k.Key)
	if err != nil || rec.ID != k.ID || rec.Run != "run-1" {
		t.Fatalf("Authenticate = %+v, %v", rec, err)
	}
	for _, wrong := range []string{"", "a2e_llm_nope", k.Key + "x", strings.TrimPrefix(k.Key, gate.KeyPrefix)} {
		if _, err := keys.Authenticate(ctx, wrong); !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", wrong, err)
		}
	}
	list, err := keys.List(ctx)
	if err != nil || len(list.Items) != 1 || list.Items[0].Key != "" || list.Items[0].ID != k.ID {
		t.Fatalf("List = %+v, %v (the secret must not be listed)", list, err)
	}
	if err := keys.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(ctx, k.Key); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("revoked key: %v", err)
	}
	if err := keys.Revoke(ctx, "llmk_nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Revoke(unknown) = %v", err)
	}
}

// A key for a run its maker cannot see is refused with the runs' error,
// not naming the request, which the client names.
func TestKeyForUnknownRun(t *testing.T) {
	keys := gate.NewKeys(keyStore(t), gate.WithRuns(noRuns{}))
	_, err := keys.Create(context.Background(), api.LLMKeyRequest{Run: "x"})
	if !errors.Is(err, errdefs.ErrNotFound) || err.Error() != "run x not found" {
		t.Errorf("Create for an unknown run = %v, want the runs' ErrNotFound alone", err)
	}
}

// noRuns finds no run.
type noRuns struct{}

func (noRuns) Get(_ context.Context, id string) (*api.Run, error) {
	return nil, errdefs.NotFound("run %s not found", id)
}

// fakeSandboxes are the sandboxes a key may name, by id.
type fakeSandboxes struct {
	mu  sync.Mutex
	ids map[string]bool
	// onGet, when set, runs at each Get, before it answers.
	onGet func(id string)
}

func (f *fakeSandboxes) Get(_ context.Context, id string) (*store.Sandbox, error) {
	if f.onGet != nil {
		f.onGet(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ids[id] {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	}
	return &store.Sandbox{ID: id}, nil
}

func (f *fakeSandboxes) delete(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, id)
}

// TestKeySandbox: a key for a sandbox that does not exist is refused,
// stored nowhere, with the sandboxes' error; a key whose sandbox is
// deleted (SandboxGone) is refused from then on and listed revoked,
// whether it was in use or not, while another sandbox's key goes on.
func TestKeySandbox(t *testing.T) {
	ctx := context.Background()
	st := keyStore(t)
	sbs := &fakeSandboxes{ids: map[string]bool{"sb-a": true, "sb-b": true}}
	keys := gate.NewKeys(st, gate.WithSandboxes(sbs))

	_, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: "sb-nope"})
	if !errors.Is(err, errdefs.ErrNotFound) || errdefs.Code(err) != api.CodeSandboxNotFound || err.Error() != "sandbox sb-nope not found" {
		t.Errorf("Create for an unknown sandbox = %v (code %s), want the sandboxes' SANDBOX_NOT_FOUND alone", err, errdefs.Code(err))
	}
	if l, err := keys.List(ctx); err != nil || len(l.Items) != 0 {
		t.Fatalf("keys after the refusal: %+v, %v; want none", l, err)
	}

	used, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: "sb-a"})
	if err != nil {
		t.Fatal(err)
	}
	unused, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: "sb-a"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: "sb-b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*api.LLMKey{used, other} {
		if _, err := keys.Authenticate(ctx, k.Key); err != nil {
			t.Fatalf("Authenticate(%s) = %v", k.ID, err)
		}
	}
	sbs.delete("sb-a")
	if err := keys.SandboxGone(ctx, "sb-a"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*api.LLMKey{used, unused} {
		if _, err := keys.Authenticate(ctx, k.Key); !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("key %s of the deleted sandbox: %v, want ErrUnauthenticated", k.ID, err)
		}
	}
	if _, err := keys.Authenticate(ctx, other.Key); err != nil {
		t.Errorf("another sandbox's key: %v", err)
	}
	l, err := keys.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range l.Items {
		if revoked := k.RevokedAt != nil; revoked != (k.Sandbox == "sb-a") {
			t.Errorf("key %s of sandbox %s listed revoked_at %v", k.ID, k.Sandbox, k.RevokedAt)
		}
	}
	if err := keys.SandboxGone(ctx, "sb-never"); err != nil {
		t.Errorf("SandboxGone of a sandbox without keys: %v", err)
	}
}

// TestKeySandboxGoneUnrevoked: a key whose sandbox was deleted while no
// one revoked its keys (a daemon killed in between, keys made before
// they were) is refused at its first use, and revoked then.
func TestKeySandboxGoneUnrevoked(t *testing.T) {
	ctx := context.Background()
	st := keyStore(t)
	sbs := &fakeSandboxes{ids: map[string]bool{"sb": true}}
	k, err := gate.NewKeys(st, gate.WithSandboxes(sbs)).Create(ctx, api.LLMKeyRequest{Sandbox: "sb"})
	if err != nil {
		t.Fatal(err)
	}
	sbs.delete("sb")
	keys := gate.NewKeys(st, gate.WithSandboxes(sbs)) // a restarted daemon's
	if _, err := keys.Authenticate(ctx, k.Key); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("key of a sandbox deleted unrevoked: %v, want ErrUnauthenticated", err)
	}
	if l, err := keys.List(ctx); err != nil || len(l.Items) != 1 || l.Items[0].RevokedAt == nil {
		t.Errorf("keys: %+v, %v; want the one, revoked", l, err)
	}
}

// TestKeySandboxDeletedWhileMade: a sandbox deleted between the check
// of a key's creation and its storing leaves no valid key: the creation
// is refused and the key stored revoked.
func TestKeySandboxDeletedWhileMade(t *testing.T) {
	ctx := context.Background()
	st := keyStore(t)
	sbs := &fakeSandboxes{ids: map[string]bool{"sb": true}}
	keys := gate.NewKeys(st, gate.WithSandboxes(sbs))
	var gets int
	sbs.onGet = func(id string) {
		if gets++; gets == 1 { // after the first check: the sandbox goes
			sbs.delete(id)
			if err := keys.SandboxGone(ctx, id); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: "sb"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Create while its sandbox is deleted = %v, want ErrNotFound", err)
	}
	l, err := keys.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range l.Items {
		if k.RevokedAt == nil {
			t.Errorf("key %s of the deleted sandbox is valid", k.ID)
		}
	}
}

// TestKeysByTenant: with API keys, each lists and revokes only the
// per-run keys it made; without (tenant ""), all of them.
func TestKeysByTenant(t *testing.T) {
	keys := newKeys(t)
	one, two := auth.WithTenant(context.Background(), "one"), auth.WithTenant(context.Background(), "two")
	k1, err := keys.Create(one, api.LLMKeyRequest{Name: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	k2, err := keys.Create(two, api.LLMKeyRequest{Name: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(ctx context.Context) (out []string) {
		t.Helper()
		l, err := keys.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range l.Items {
			out = append(out, k.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{k1.ID}, ids(one)); diff != "" {
		t.Errorf("tenant one's keys (-want +got):\n%s", diff)
	}
	if got := ids(context.Background()); len(got) != 2 {
		t.Errorf("no tenant lists %v, want both", got)
	}
	if err := keys.Revoke(one, k2.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("tenant one revoking two's key: %v, want ErrNotFound", err)
	}
	if _, err := keys.Authenticate(context.Background(), k2.Key); err != nil {
		t.Errorf("two's key after one's attempt: %v", err)
	}
	if err := keys.Revoke(two, k2.ID); err != nil {
		t.Errorf("tenant two revoking its key: %v", err)
	}
}

// recorder collects the exchanges the gate's proxy records, as the
// archive does (proxy.WithRecorder), at their end.
type recorder struct {
	mu  sync.Mutex
	all []proxy.Exchange
}

func (r *recorder) Begin(*http.Request, []byte, *proxy.Exchange) proxy.Recording { return recording{r} }

// recording keeps only the end of an exchange.
type recording struct{ r *recorder }

func (recording) UpstreamRequest(*http.Request, []byte) {}
func (recording) UpstreamResponse(int, http.Header)     {}
func (recording) UpstreamData([]byte)                   {}
func (recording) Response(int, http.Header)             {}
func (recording) ResponseData([]byte)                   {}
func (rc recording) End(ex *proxy.Exchange)             { rc.r.add(ex) }

func (r *recorder) add(ex *proxy.Exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, *ex)
}

func (r *recorder) last() proxy.Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.all[len(r.all)-1]
}

// clientCalls are a request of each wire format for model m.
var clientCalls = map[llm.Format]struct{ path, body string }{
	llm.FormatOpenAI:    {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
	llm.FormatResponses: {"/v1/responses", `{"model":"m","input":"hi"}`},
	llm.FormatAnthropic: {"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	llm.FormatGemini:    {"/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
}

func call(t *testing.T, h http.Handler, f llm.Format, key string) (int, []byte) {
	t.Helper()
	return post(t, h, f, clientCalls[f].path, clientCalls[f].body, key)
}

// post sends a client's request of format f.
func post(t *testing.T, h http.Handler, f llm.Format, path, body, key string) (int, []byte) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/llm"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		switch f {
		case llm.FormatAnthropic:
			r.Header.Set("x-api-key", key)
			r.Header.Set("anthropic-version", "2023-06-01")
		case llm.FormatGemini:
			r.Header.Set("x-goog-api-key", key)
		default:
			r.Header.Set("Authorization", "Bearer "+key)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	got, _ := io.ReadAll(w.Result().Body)
	return w.Code, got
}

// errorMessage reads the message of an error body of format f, checking
// its shape.
func errorMessage(t *testing.T, f llm.Format, body []byte) string {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s error body: %v: %s", f, err, body)
	}
	switch f {
	case llm.FormatAnthropic:
		if v.Type != "error" || v.Error.Type == "" {
			t.Errorf("not an Anthropic error: %s", body)
		}
	case llm.FormatGemini:
		if v.Error.Status == "" {
			t.Errorf("not a Gemini error: %s", body)
		}
	default:
		if v.Error.Type == "" {
			t.Errorf("not an OpenAI error: %s", body)
		}
	}
	return v.Error.Message
}

func newGate(t *testing.T, cfg gate.Config, limits gate.Limits) (*gate.Gate, *recorder) {
	t.Helper()
	return newGateOf(t, llm.FormatOpenAI, cfg, limits)
}

// newGateOf is a gate whose model m is served by a fake upstream of format
// f, every answer counting 10 tokens.
func newGateOf(t *testing.T, f llm.Format, cfg gate.Config, limits gate.Limits) (*gate.Gate, *recorder) {
	t.Helper()
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[f], "upstream-key", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("ok")}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 6, OutputTokens: 4}}, nil
	})
	rec := &recorder{}
	g := gate.New(cfg)
	err := g.Apply(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: up.URL, APIKey: "upstream-key"}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	}, limits, proxy.WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	return g, rec
}

func TestNotConfigured(t *testing.T) {
	g := gate.New(gate.Config{})
	for f := range clientCalls {
		code, body := call(t, g.Handler("/llm"), f, "")
		if msg := errorMessage(t, f, body); code != 404 || !strings.Contains(msg, "--llm-config") {
			t.Errorf("%s: %d %s", f, code, body)
		}
	}
}

func TestAuthentication(t *testing.T) {
	ctx := context.Background()
	apiKeys, err := auth.NewKeys("a2e_0123456789abcdef0123")
	if err != nil {
		t.Fatal(err)
	}
	keys := newKeys(t)
	// Made by an API key's tenant: its calls are that tenant's.
	k, err := keys.Create(auth.WithTenant(ctx, "tenant-1"), api.LLMKeyRequest{Sandbox: "sb-9", Run: "run-7"})
	if err != nil {
		t.Fatal(err)
	}
	g, rec := newGate(t, gate.Config{APIKeys: apiKeys, Keys: keys}, gate.Limits{})
	tests := []struct {
		name       string
		key        string
		wantStatus int
		want       caller.Caller
	}{
		{"no key", "", 401, caller.Caller{}},
		{"wrong key", "a2e_wrongwrongwrongwrong", 401, caller.Caller{}},
		{"api key", "a2e_0123456789abcdef0123", 200, caller.Caller{Tenant: auth.Tenant("a2e_0123456789abcdef0123")}},
		{"llm key", k.Key, 200, caller.Caller{Key: k.ID, Sandbox: "sb-9", Run: "run-7", Tenant: "tenant-1"}},
		{"bad llm key", gate.KeyPrefix + "00", 401, caller.Caller{}},
	}
	for _, tc := range tests {
		for f := range clientCalls {
			t.Run(tc.name+"/"+string(f), func(t *testing.T) {
				code, body := call(t, g.Handler("/llm"), f, tc.key)
				if code != tc.wantStatus {
					t.Fatalf("status %d, want %d: %s", code, tc.wantStatus, body)
				}
				if code != 200 {
					errorMessage(t, f, body)
					return
				}
				if got := rec.last().Caller; got != tc.want {
					t.Errorf("caller %+v, want %+v", got, tc.want)
				}
			})
		}
	}
	// A sandbox needs no key, and what it presents does not change who
	// it is.
	h := g.SandboxHandler("/llm", "sb-1", func(context.Context) (string, string, error) { return "run-1", "", nil })
	if code, body := call(t, h, llm.FormatOpenAI, "agent2env"); code != 200 {
		t.Fatalf("sandbox: %d %s", code, body)
	}
	if got, want := rec.last().Caller, (caller.Caller{Sandbox: "sb-1", Run: "run-1"}); got != want {
		t.Errorf("sandbox caller %+v, want %+v", got, want)
	}
}

func TestLimitsInEveryFormat(t *testing.T) {
	ctx := context.Background()
	type limited struct {
		name    string
		limits  gate.Limits
		key     api.LLMKeyRequest
		allowed int    // calls that pass before the 429
		want    string // in the message
	}
	tests := []limited{
		{name: "sandbox requests", limits: gate.Limits{Sandbox: gate.Limit{RequestsPerMinute: 2}}, allowed: 2, want: "sandbox sb-1 is over its rate limit of 2 requests per minute"},
		{name: "run budget", limits: gate.Limits{Run: gate.Limit{BudgetTokens: 15}}, allowed: 2, want: "run run-1 has used its budget of 15 tokens (20 used)"},
		{name: "sandbox tokens", limits: gate.Limits{Sandbox: gate.Limit{TokensPerMinute: 25}}, allowed: 3, want: "sandbox sb-1 is over its rate limit of 25 tokens per minute (30 in the last minute)"},
		{name: "key budget", key: api.LLMKeyRequest{BudgetTokens: 10}, allowed: 1, want: "has used its budget of 10 tokens (10 used)"},
		{name: "key default rpm", limits: gate.Limits{Key: gate.Limit{RequestsPerMinute: 1}}, key: api.LLMKeyRequest{BudgetTokens: 1000}, allowed: 1, want: "over its rate limit of 1 requests per minute"},
	}
	for _, tc := range tests {
		for f := range clientCalls {
			t.Run(tc.name+"/"+string(f), func(t *testing.T) {
				keys := newKeys(t)
				g, _ := newGate(t, gate.Config{Keys: keys, Metrics: gate.NewMetrics()}, tc.limits)
				h := g.SandboxHandler("/llm", "sb-1", func(context.Context) (string, string, error) { return "run-1", "", nil })
				secret := "agent2env"
				if tc.key != (api.LLMKeyRequest{}) {
					k, err := keys.Create(ctx, tc.key)
					if err != nil {
						t.Fatal(err)
					}
					secret, h = k.Key, g.Handler("/llm")
				}
				for i := range tc.allowed {
					if code, body := call(t, h, f, secret); code != 200 {
						t.Fatalf("call %d: %d %s", i+1, code, body)
					}
				}
				code, body := call(t, h, f, secret)
				if code != http.StatusTooManyRequests {
					t.Fatalf("past the limit: %d %s", code, body)
				}
				if msg := errorMessage(t, f, body); !strings.Contains(msg, tc.want) {
					t.Errorf("message %q does not say %q", msg, tc.want)
				}
			})
		}
	}
}

// streamCalls are streaming requests of each wire format for model m, as a
// client that never asks for usage sends them: the Chat Completions one
// without stream_options, the Gemini one also without ?alt=sse (a JSON
// array comes back).
var streamCalls = map[string]struct {
	format     llm.Format
	path, body string
}{
	"openai":      {llm.FormatOpenAI, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	"responses":   {llm.FormatResponses, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
	"anthropic":   {llm.FormatAnthropic, "/v1/messages", `{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	"gemini":      {llm.FormatGemini, "/v1beta/models/m:streamGenerateContent?alt=sse", clientCalls[llm.FormatGemini].body},
	"gemini-json": {llm.FormatGemini, "/v1beta/models/m:streamGenerateContent", clientCalls[llm.FormatGemini].body},
}

// TestBudgetsOfStreams: a client that never asks for usage is charged all
// the same, and stopped by its budget, in every wire format, streaming or
// not, its upstream of its own format (pass-through) or of another
// (translated). Chat Completions streams passed through were charged
// nothing: OpenAI counts a stream only when asked to.
func TestBudgetsOfStreams(t *testing.T) {
	type client struct {
		format     llm.Format
		path, body string
	}
	clients := map[string]client{}
	for f, c := range clientCalls {
		clients[string(f)+"-whole"] = client{f, c.path, c.body}
	}
	for name, c := range streamCalls {
		clients[name+"-stream"] = client{c.format, c.path, c.body}
	}
	for name, c := range clients {
		other := llm.FormatOpenAI
		if c.format == llm.FormatOpenAI {
			other = llm.FormatAnthropic
		}
		for _, up := range []llm.Format{c.format, other} {
			t.Run(name+"/upstream-"+string(up), func(t *testing.T) {
				g, rec := newGateOf(t, up, gate.Config{}, gate.Limits{Run: gate.Limit{BudgetTokens: 15}})
				h := g.SandboxHandler("/llm", "sb-1", func(context.Context) (string, string, error) { return "run-1", "", nil })
				for i := range 2 {
					if code, body := post(t, h, c.format, c.path, c.body, "agent2env"); code != 200 {
						t.Fatalf("call %d: %d %s", i+1, code, body)
					}
					if ex := rec.last(); ex.Usage.InputTokens+ex.Usage.OutputTokens != 10 || ex.UsageEstimated {
						t.Fatalf("call %d charged %+v (estimated: %v), want the upstream's 10 tokens", i+1, ex.Usage, ex.UsageEstimated)
					}
				}
				code, body := post(t, h, c.format, c.path, c.body, "agent2env")
				if code != http.StatusTooManyRequests {
					t.Fatalf("past the budget: %d %s", code, body)
				}
				if msg := errorMessage(t, c.format, body); !strings.Contains(msg, "run run-1 has used its budget of 15 tokens (20 used)") {
					t.Errorf("message %q", msg)
				}
			})
		}
	}
}

func TestKeyUsageIsFlushed(t *testing.T) {
	ctx := context.Background()
	keys := newKeys(t)
	g, _ := newGate(t, gate.Config{Keys: keys}, gate.Limits{})
	k, err := keys.Create(ctx, api.LLMKeyRequest{BudgetTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code, body := call(t, g.Handler("/llm"), llm.FormatOpenAI, k.Key); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	if err := keys.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := keys.List(ctx)
	if err != nil || list.Items[0].UsedTokens != 30 {
		t.Fatalf("used %+v, %v; want 30", list, err)
	}
}

func TestProgressAndModels(t *testing.T) {
	var mu sync.Mutex
	var heard []caller.Caller
	progress := func(c caller.Caller) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, c)
	}
	if got := gate.New(gate.Config{}).Models(); got != nil {
		t.Errorf("Models before Apply = %v, want none", got)
	}
	g, _ := newGate(t, gate.Config{Progress: progress}, gate.Limits{})
	if got := g.Models(); len(got) != 1 || got[0] != "m" {
		t.Errorf("Models = %v, want [m]", got)
	}
	// An operator's call is no run's progress; a sandbox's is.
	if code, body := call(t, g.Handler("/llm"), llm.FormatOpenAI, ""); code != 200 {
		t.Fatalf("operator: %d %s", code, body)
	}
	h := g.SandboxHandler("/llm", "sb-1", func(context.Context) (string, string, error) { return "run-1", "", nil })
	if code, body := call(t, h, llm.FormatAnthropic, "agent2env"); code != 200 {
		t.Fatalf("sandbox: %d %s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := (caller.Caller{Sandbox: "sb-1", Run: "run-1"}); len(heard) != 2 || heard[0] != want || heard[1] != want {
		t.Errorf("progress heard %+v, want %+v at the call's start and end", heard, want)
	}
}

// A call that waits long on its model is progress all along, every
// ProgressEvery.
func TestProgressOfASlowCall(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		time.Sleep(2*gate.ProgressEvery + gate.ProgressEvery/2)
		return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("late")}, StopReason: llm.StopEndTurn}, nil
	})
	var mu sync.Mutex
	var at []time.Duration
	start := time.Now()
	g := gate.New(gate.Config{Progress: func(caller.Caller) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Since(start))
	}})
	if err := g.Apply(proxy.Config{Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
		Models: []proxy.Model{{Name: "m", Provider: "up"}}}, gate.Limits{}); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, g.SandboxHandler("/llm", "sb-1", nil), llm.FormatOpenAI, ""); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	time.Sleep(gate.ProgressEvery + 100*time.Millisecond) // none after the end
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 4 {
		t.Fatalf("progress at %v, want at the start, after 1 and 2 intervals, and at the end", at)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap > gate.ProgressEvery+gate.ProgressEvery/2 {
			t.Errorf("progress at %v: a gap of %s", at, gap)
		}
	}
}
