package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// TestRedirectNotFollowed: an upstream's redirect is not followed — it
// would send the provider's key wherever it points (Go keeps x-api-key and
// x-goog-api-key across hosts) — and the client gets a 502 in its own
// format that names the redirect, passed through or translated.
func TestRedirectNotFollowed(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
	}))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	for _, tc := range []struct{ upstream, client llm.Format }{
		{llm.FormatAnthropic, llm.FormatAnthropic},
		{llm.FormatGemini, llm.FormatGemini},
		{llm.FormatOpenAI, llm.FormatOpenAI},
		{llm.FormatAnthropic, llm.FormatOpenAI},
	} {
		t.Run(fmt.Sprintf("%s/client-%s", tc.upstream, tc.client), func(t *testing.T) {
			base := redirecting.URL
			if tc.upstream == llm.FormatOpenAI {
				base += "/v1"
			}
			url, x := serve(t, proxy.Config{
				Providers: []proxy.Provider{{Name: "up", Type: string(tc.upstream), BaseURL: base, APIKey: upstreamKey}},
				Models:    []proxy.Model{{Name: "m", Provider: "up"}},
			})
			resp, _, got := post(t, url, tc.client, "m", false)
			e := proxy.Codecs[tc.client].DecodeError(resp.StatusCode, got)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(e.Message, "redirect") {
				t.Errorf("answer %d %s; want a 502 in the client's format naming the redirect", resp.StatusCode, got)
			}
			if n := leaked.Swap(0); n != 0 {
				t.Errorf("the redirect was followed: %d requests elsewhere", n)
			}
			if ex := x.last(t); ex.Status != http.StatusBadGateway {
				t.Errorf("exchange status %d, want 502", ex.Status)
			}
		})
	}
}
