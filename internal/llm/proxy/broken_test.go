package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// How an upstream breaks off.
const (
	breakCut    = "cut"    // the connection closed after the answer's first piece
	breakStall  = "stall"  // the rest of the answer never comes
	breakSilent = "silent" // no answer at all
	// the connection closed after the first piece of an answer that only
	// the close delimits (no Content-Length, not chunked): its end looks
	// like any other, the answer's own end missing
	breakClosed = "closed"
)

// brokenUpstream is an OpenAI-compatible upstream whose answers break off
// as how says: a whole answer short of its Content-Length, a stream
// without its end.
func brokenUpstream(t *testing.T, how string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		if how == breakSilent { // the request read: its end is seen
			<-r.Context().Done()
			return
		}
		if how == breakClosed {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			ctype, body := "application/json", `{"id":"c","object":"chat.completion","choices":[`
			if req.Stream {
				ctype, body = "text/event-stream", `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hel"}}]}`+"\n\n"
			}
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nConnection: close\r\n\r\n%s", ctype, body)
			return
		}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hel"}}]}` + "\n\n"))
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "200")
			w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[`))
		}
		if how == breakStall {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		hangUp(t, w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// hangUp sends what w has and closes its connection, the answer unended.
func hangUp(t *testing.T, w http.ResponseWriter) {
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	conn.Close()
}

// TestUpstreamBreaksOff: an upstream whose answer breaks off (its
// connection closed, or the route's timeout come) is an error in the
// client's own format, passed through or translated: a whole answer a 502
// (504 for the timeout, always) rather than the part that came as a 200; a
// stream an error event at its end rather than a clean end; and the
// exchange is recorded with the error.
func TestUpstreamBreaksOff(t *testing.T) {
	for _, tc := range []struct {
		how    string
		status int
		// in the error's message, of a whole answer and of a stream
		// (translated, in its codec's words for a broken stream)
		want, wantStream string
	}{
		{breakCut, http.StatusBadGateway, "broke off", ""},
		// A stream is told to have ended before its end; a whole answer,
		// declared JSON, by the JSON not being whole.
		{breakClosed, http.StatusBadGateway, "not whole JSON", "ended before"},
		{breakStall, http.StatusGatewayTimeout, "timeout", "timeout"},
		// Refused before any of it is sent, a stream too.
		{breakSilent, http.StatusGatewayTimeout, "timeout", ""},
	} {
		t.Run(tc.how, func(t *testing.T) {
			base, x := serve(t, proxy.Config{
				Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: brokenUpstream(t, tc.how)}},
				Models:    []proxy.Model{{Name: "m", Provider: "up", Timeout: 300 * time.Millisecond}},
			})
			for f := range inbounds {
				for _, stream := range []bool{false, true} {
					resp, _, got := post(t, base, f, "m", stream)
					ex := x.wait(t)
					x.mu.Lock()
					x.all = nil
					x.mu.Unlock()
					if ex.Err == nil {
						t.Errorf("%s stream=%t: exchange recorded without its error", f, stream)
					}
					c := proxy.Codecs[f]
					if !stream || tc.how == breakSilent {
						if e := c.DecodeError(resp.StatusCode, got); resp.StatusCode != tc.status || !strings.Contains(e.Message, tc.want) {
							t.Errorf("%s whole: %d %s, want a %d error in the client's format saying %q", f, resp.StatusCode, got, tc.status, tc.want)
						}
						continue
					}
					evs, err := llmtest.DecodeStream(c, bytes.NewReader(got))
					if err != nil {
						t.Errorf("%s stream: %v\n%s", f, err, got)
						continue
					}
					if n := len(evs); resp.StatusCode != 200 || n == 0 || evs[n-1].Type != llm.EventError || !strings.Contains(evs[n-1].Err.Message, tc.wantStream) {
						t.Errorf("%s stream: %d, want a 200 stream ending with an error event saying %q\n%s", f, resp.StatusCode, tc.wantStream, got)
					}
				}
			}
		})
	}
}

// TestUpstreamBreaksOffUnframed: a stream passed through that is no
// stream of events (an upstream answering a stream whole, Gemini's JSON
// array without alt=sse), which cannot end with an error event, breaks the
// client's connection when the upstream's breaks, once the exchange is
// recorded: the client sees it broken, as it would the upstream's, not a
// part ended cleanly.
func TestUpstreamBreaksOffUnframed(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[{"candidates":[{"content":{"role":"model","parts":[{"text":"hel"}]}}]}`))
		hangUp(t, w)
	}))
	t.Cleanup(up.Close)
	base, x := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "gemini", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	})
	resp, err := http.Post(base+"/v1beta/models/m:streamGenerateContent", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the client read %d %q to a clean end; want its connection broken", resp.StatusCode, got)
	}
	if ex := x.wait(t); ex.Err == nil {
		t.Error("exchange recorded without its error")
	}
}
