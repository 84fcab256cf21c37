package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// TestLLMArchive: a proxy built with the daemon's options records into
// its archive, which the API reads, across a restart.
func TestLLMArchive(t *testing.T) {
	dir := t.TempDir()
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	d := start(t, testConfig(dir, rt), nil)
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Content: []llm.Part{llm.Text("hi")}, StopReason: llm.StopEndTurn}, nil
	})
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	}, llmProxyOptions(d.sys.LLMArchive)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := d.sys.LLMArchive.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	list := func(c *client.Client) []api.LLMExchange {
		t.Helper()
		l, err := c.LLM().List(context.Background(), client.LLMFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	xs := list(d.api)
	if len(xs) != 1 || xs[0].Model != "m" || xs[0].State != "complete" {
		t.Fatalf("exchanges %+v", xs)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d = start(t, testConfig(dir, rt), nil)
	if got := list(d.api); len(got) != 1 || got[0].ID != xs[0].ID {
		t.Fatalf("after a restart: %+v", got)
	}
	raw, err := d.api.LLM().Raw(context.Background(), xs[0].ID, api.LLMPartRequest)
	if err != nil || !strings.Contains(string(raw), `"hello"`) {
		t.Errorf("request read back as %q, %v", raw, err)
	}
}
