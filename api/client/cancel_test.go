package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// TestStreamCancel cancels each streaming call's context once its first
// event has arrived, while the daemon holds the stream open: the call must
// return promptly with an error wrapping context.Canceled (Follow: nil, as
// it documents), and leave no goroutine behind.
func TestStreamCancel(t *testing.T) {
	tests := []struct {
		name  string
		event string // the first event, after which the daemon waits
		call  func(ctx context.Context, c *client.Client, started func()) error
		// quiet says the call returns nil when its context ends.
		quiet bool
	}{
		{"sandbox exec stream", "event: stdout\ndata: {\"data\":\"hi\"}\n\n",
			func(ctx context.Context, c *client.Client, started func()) error {
				_, err := c.Sandbox.ExecuteStream(ctx, "sb1", api.ExecRequest{Command: []string{"sleep", "9"}}, writerFunc(started), nil)
				return err
			}, false},
		{"context execute stream", "event: stdout\ndata: {\"text\":\"hi\"}\n\n",
			func(ctx context.Context, c *client.Client, started func()) error {
				_, err := c.Contexts().ExecuteStream(ctx, "ctx1", api.ExecuteRequest{Code: "1"},
					client.StreamHandler{OnStdout: func(string) { started() }})
				return err
			}, false},
		{"run events", "event: event\ndata: {\"seq\":1,\"type\":\"status\"}\n\n",
			func(ctx context.Context, c *client.Client, started func()) error {
				return c.Runs().Events(ctx, "run-1", func(api.RunEvent) error { started(); return nil })
			}, false},
		{"image follow", "event: progress\ndata: {}\n\n",
			func(ctx context.Context, c *client.Client, started func()) error {
				_, err := c.Image.Follow(ctx, "alpine", func(api.ImageProgress) { started() })
				return err
			}, false},
		{"llm follow", "event: exchange\nid: c1\ndata: {\"id\":\"llx_1\"}\n\n",
			func(ctx context.Context, c *client.Client, started func()) error {
				return c.LLM().Follow(ctx, client.LLMFilter{}, client.LLMFollowFrom{}, func(string, api.LLMExchange) error { started(); return nil })
			}, true},
		{"llm export each", "{\"id\":\"llx_1\"}\n",
			func(ctx context.Context, c *client.Client, started func()) error {
				return c.LLM().ExportEach(ctx, client.LLMFilter{}, func(*api.LLMExchangeDetail) error { started(); return nil })
			}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.event)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			defer srv.Close()
			hc := &http.Client{Transport: &http.Transport{}}
			c, err := client.New(srv.URL, client.WithHTTPClient(hc))
			if err != nil {
				t.Fatal(err)
			}
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tt.call(ctx, c, cancel) }()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the call did not return 5 s after its context was cancelled")
			}
			switch {
			case tt.quiet && err != nil:
				t.Errorf("error %v, want nil", err)
			case !tt.quiet && !errors.Is(err, context.Canceled):
				t.Errorf("error %v, want one wrapping context.Canceled", err)
			}
			hc.CloseIdleConnections()
			for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines after the call, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// TestFollowCancelledEarly ends Follow's context before the daemon
// answers: Follow returns nil, as when its context ends mid-stream.
func TestFollowCancelledEarly(t *testing.T) {
	answer := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-answer:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(answer)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = c.LLM().Follow(ctx, client.LLMFilter{}, client.LLMFollowFrom{}, func(string, api.LLMExchange) error { return nil })
	if err != nil {
		t.Errorf("Follow: %v, want nil", err)
	}
}

// writerFunc is an io.Writer that calls f at each write.
type writerFunc func()

func (f writerFunc) Write(p []byte) (int, error) {
	f()
	return len(p), nil
}
