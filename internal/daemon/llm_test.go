package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// llmCall posts an OpenAI chat call to the daemon's /llm and returns the
// status and body.
func llmCall(t *testing.T, addr, key string, stream bool) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":%t}`, stream)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/llm/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sseUpstream is an OpenAI-compatible upstream that streams text in two
// chunks, the second once hold is closed (never, when nil).
func sseUpstream(t *testing.T, text string, hold <-chan struct{}) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := func(s string) string {
			return fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", s)
		}
		if !strings.Contains(readAll(r.Body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk(text[:1]))
		w.(http.Flusher).Flush()
		if hold != nil {
			<-hold
		}
		io.WriteString(w, chunk(text[1:])+"data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

func writeLLMConfig(t *testing.T, path, baseURL string) {
	t.Helper()
	cfg := fmt.Sprintf("providers:\n  - name: up\n    type: openai\n    base_url: %s\nmodels:\n  - name: m\n    provider: up\n", baseURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// llmTestConfig is a test daemon's configuration with an LLM
// configuration of model m at the OpenAI-compatible upstream baseURL.
func llmTestConfig(t *testing.T, baseURL string) Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "llm.yaml")
	writeLLMConfig(t, path, baseURL)
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.LLMConfig = path
	return cfg
}

func TestLLMNotConfigured(t *testing.T) {
	d := start(t, testConfig(t.TempDir(), fakeruntime.New()), nil)
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.addr+"/llm/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "--llm-config") {
		t.Errorf("unconfigured /llm: %d %s (want Anthropic's error shape naming --llm-config)", resp.StatusCode, body)
	}
	if err := d.sys.ReloadLLM(); err == nil {
		t.Error("ReloadLLM without a file: no error")
	}
}

// TestLLMReload: ReloadLLM swaps the configuration; a stream in flight
// finishes on the one it started on, and a bad file keeps the current one.
func TestLLMReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llm.yaml")
	hold := make(chan struct{})
	writeLLMConfig(t, path, sseUpstream(t, "one", hold))
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.LLMConfig = path
	d := start(t, cfg, nil)

	streamed := make(chan string, 1)
	go func() {
		_, body := llmCall(t, d.addr, "", true)
		streamed <- body
	}()
	time.Sleep(100 * time.Millisecond) // the stream's first chunk is out
	writeLLMConfig(t, path, sseUpstream(t, "two", nil))
	if err := d.sys.ReloadLLM(); err != nil {
		t.Fatal(err)
	}
	if code, body := llmCall(t, d.addr, "", false); code != 200 || !strings.Contains(body, `"two"`) {
		t.Errorf("after the reload: %d %s", code, body)
	}
	close(hold)
	select {
	case body := <-streamed:
		if !strings.Contains(body, `"content":"o"`) || !strings.Contains(body, `"content":"ne"`) || !strings.Contains(body, "[DONE]") {
			t.Errorf("the stream in flight did not finish whole: %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream in flight never finished")
	}

	if err := os.WriteFile(path, []byte("providers:\n  - name: up\n    type: nope\n    base_url: http://x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := d.sys.ReloadLLM()
	if err == nil || !strings.Contains(err.Error(), "llm.yaml:3:") || !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad file: %v, want an error naming line 3", err)
	}
	if code, body := llmCall(t, d.addr, "", false); code != 200 || !strings.Contains(body, `"two"`) {
		t.Errorf("after a bad reload: %d %s (want the configuration in use)", code, body)
	}
}

// TestLLMKeys: with API keys on, /llm takes an API key or a per-run key
// made through the API, refuses it once revoked, and refuses no key in the
// client's format.
func TestLLMKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "llm.yaml")
	writeLLMConfig(t, path, sseUpstream(t, "ok", nil))
	apiKey := auth.NewKey()
	keys, err := auth.NewKeys(apiKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.LLMConfig, cfg.Keys = path, keys
	d := start(t, cfg, nil)
	c, err := client.New("http://"+d.addr, client.WithToken(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.LLMKeys().Create(ctx, api.LLMKeyRequest{Run: submitRun(t, d, c), ExpiresIn: 600})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		want int
	}{
		{"no key", "", 401},
		{"wrong key", "a2e_nope_nope_nope_nope", 401},
		{"api key", apiKey, 200},
		{"per-run key", k.Key, 200},
	}
	for _, tc := range tests {
		if code, body := llmCall(t, d.addr, tc.key, false); code != tc.want || (code == 401 && !strings.Contains(body, `"invalid_request_error"`) && !strings.Contains(body, `"authentication_error"`)) {
			t.Errorf("%s: %d %s, want %d in OpenAI's error shape", tc.name, code, body, tc.want)
		}
	}
	list, err := c.LLMKeys().List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != k.ID || list[0].Key != "" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := c.LLMKeys().Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if code, body := llmCall(t, d.addr, k.Key, false); code != 401 {
		t.Errorf("revoked key: %d %s", code, body)
	}
	if err := c.LLMKeys().Revoke(ctx, "llmk_nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Revoke(unknown) = %v, want ErrNotFound", err)
	}
	// The REST API still wants its API key: a per-run key is not one.
	other, _ := client.New("http://"+d.addr, client.WithToken(k.Key))
	if _, err := other.LLMKeys().List(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("List with a per-run key = %v, want ErrUnauthenticated", err)
	}
}

// TestLLMMetrics: a call through /llm is counted by model and provider,
// with its tokens and latency.
func TestLLMMetrics(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("hi")}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 11, OutputTokens: 7, CachedTokens: 5}}, nil
	})
	cfg := llmTestConfig(t, up.URL)
	d := start(t, cfg, nil)
	if code, body := llmCall(t, d.addr, "", false); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics := readAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`agent2env_llm_requests_total{code="200",model="m",provider="up"} 1`,
		`agent2env_llm_tokens_total{model="m",provider="up",type="input"} 11`,
		`agent2env_llm_tokens_total{model="m",provider="up",type="output"} 7`,
		`agent2env_llm_tokens_total{model="m",provider="up",type="cached"} 5`,
		`agent2env_llm_request_duration_seconds_count{model="m",provider="up",stream="false"} 1`,
		`agent2env_llm_first_byte_seconds_count{model="m",provider="up"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestSandboxChannel: what a sandbox's channel serves knows the sandbox,
// whatever key the call presents, and counts the call against it; a run id
// in the sandbox's environment counts for nothing (runs are known by the
// runner); MCP is there too.
func TestSandboxChannel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llm.yaml")
	writeLLMConfig(t, path, sseUpstream(t, "ok", nil))
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(cfg, "limits:\n  sandbox:\n    requests_per_minute: 2\n  run:\n    requests_per_minute: 1\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t.TempDir(), fakeruntime.New())
	c.LLMConfig = path
	d := start(t, c, nil)
	d.importTiny()
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef, Env: map[string]string{caller.EnvRun: "run-42"}})
	srv := httptest.NewServer(d.sys.sandboxHandler(sb.ID))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if code, body := llmCall(t, addr, "sk-anything", false); code != 200 {
		t.Fatalf("first call: %d %s", code, body)
	}
	// Past run-42's limit, were the environment believed.
	if code, body := llmCall(t, addr, "", false); code != 200 {
		t.Fatalf("second call: %d %s", code, body)
	}
	code, body := llmCall(t, addr, "", false)
	if want := "sandbox " + sb.ID + " is over its rate limit of 2 requests per minute"; code != 429 || !strings.Contains(body, want) {
		t.Errorf("third call: %d %s, want 429 saying %q", code, body, want)
	}
	resp, err := http.Post(srv.URL+"/nothing", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("MCP initialize: %d", resp.StatusCode)
	}
}

// TestLLMKeySandbox: a per-run key for a sandbox that does not exist is a
// 404 SANDBOX_NOT_FOUND that stores nothing; a key for a sandbox works
// until the sandbox is deleted, and is then refused and listed revoked.
func TestLLMKeySandbox(t *testing.T) {
	ctx := context.Background()
	cfg := llmTestConfig(t, sseUpstream(t, "ok", nil))
	d := start(t, cfg, nil)
	d.importTiny()
	keys := d.api.LLMKeys()
	var apiErr *client.APIError
	if _, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: "nosuchsandbox"}); !errors.As(err, &apiErr) ||
		apiErr.StatusCode != http.StatusNotFound || apiErr.Code != api.CodeSandboxNotFound || !strings.Contains(err.Error(), "nosuchsandbox") {
		t.Fatalf("key for an unknown sandbox: %v; want a 404 SANDBOX_NOT_FOUND naming it", err)
	}
	if ks, err := keys.List(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("keys after the refusal: %+v, %v; want none", ks, err)
	}
	sb, err := d.api.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: tinyRef})
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.Create(ctx, api.LLMKeyRequest{Sandbox: sb.ID, ExpiresIn: 600})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := llmCall(t, d.addr, k.Key, false); code != http.StatusOK {
		t.Fatalf("call with the sandbox's key: %d %s", code, body)
	}
	if err := d.api.Sandbox.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if code, body := llmCall(t, d.addr, k.Key, false); code != http.StatusUnauthorized {
		t.Errorf("call with the deleted sandbox's key: %d %s; want 401", code, body)
	}
	if ks, err := keys.List(ctx); err != nil || len(ks) != 1 || ks[0].RevokedAt == nil {
		t.Errorf("keys after the sandbox's deletion: %+v, %v; want the one, revoked", ks, err)
	}
}

// TestShutdownDrainsSandboxCalls: a sandbox's model call in flight on its
// channel when the daemon shuts down is answered whole before Serve
// returns, as an API client's is; it was cut when the runtime then closed
// the channel.
func TestShutdownDrainsSandboxCalls(t *testing.T) {
	hold := make(chan struct{})
	d := start(t, llmTestConfig(t, sseUpstream(t, "whole", hold)), nil)
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the upstream's Close, which waits for it
	d.importTiny()
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef})
	sock := filepath.Join(t.TempDir(), "svc.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The channel ends when Serve has returned, as the runtime's Close
	// then ends it.
	channelCtx, endChannel := context.WithCancel(context.Background())
	defer endChannel()
	go d.sys.channels.ServeSandbox(channelCtx, l, sb.ID)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	answered := make(chan string, 1)
	go func() {
		resp, err := hc.Post("http://127.0.0.1:4000/llm/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- fmt.Sprintf("%d %s %v", resp.StatusCode, b, err)
	}()
	time.Sleep(200 * time.Millisecond) // the call's first chunk is out
	stopped := make(chan error, 1)
	go func() {
		err := d.stop()
		endChannel()
		stopped <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("the daemon stopped (%v) with a sandbox's call in flight", err)
	default:
	}
	release()
	if got := <-answered; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"hole"`) || !strings.Contains(got, "[DONE]") || !strings.HasSuffix(got, "<nil>") {
		t.Errorf("the call in flight at shutdown: %s, want all of its stream", got)
	}
	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
}
