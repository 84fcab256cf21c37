package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
)

// follower is a client of GET /api/v1/llm/exchanges/stream: the events it
// read, on a channel.
type follower struct {
	events chan sse.Event
	cancel context.CancelFunc
}

func follow(t *testing.T, base, query string, header http.Header) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/llm/exchanges/stream"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("follow %s: %d %s", query, resp.StatusCode, b)
	}
	f := &follower{events: make(chan sse.Event, 100), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				close(f.events)
				return
			}
			ev.Data = append([]byte(nil), ev.Data...)
			f.events <- ev
		}
	}()
	t.Cleanup(cancel)
	return f
}

// next is the next exchange event, within wait.
func (f *follower) next(t *testing.T, wait time.Duration) (string, api.LLMExchange) {
	t.Helper()
	select {
	case ev, ok := <-f.events:
		if !ok {
			t.Fatal("the stream ended")
		}
		if ev.Name != api.LLMEventExchange {
			t.Fatalf("event %q: %s", ev.Name, ev.Data)
		}
		var x api.LLMExchange
		if err := json.Unmarshal(ev.Data, &x); err != nil {
			t.Fatal(err)
		}
		return ev.ID, x
	case <-time.After(wait):
		t.Fatalf("no event within %s", wait)
	}
	panic("unreachable")
}

// none checks that no event comes within wait.
func (f *follower) none(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case ev := <-f.events:
		t.Fatalf("unexpected event %q %s", ev.Name, ev.Data)
	case <-time.After(wait):
	}
}

// streamServer serves h; done receives when a stream's handler returns.
func streamServer(t *testing.T, h http.Handler) (string, <-chan struct{}) {
	t.Helper()
	done := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if strings.HasSuffix(r.URL.Path, "/stream") {
			done <- struct{}{}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, done
}

// TestLLMStreamFollows: an exchange that ends after the follower came
// reaches it as soon as it is indexed (the follower is woken by the index,
// it does not poll), with the filters applied; a client that leaves ends
// the handler.
func TestLLMStreamFollows(t *testing.T) {
	e, h := llmServer(t)
	base, done := streamServer(t, h)
	old := e.call(t, "sb1", "", "a", false, "before")

	all := follow(t, base, "", nil)
	sb2 := follow(t, base, "?sandbox=sb2&status=2xx", nil)
	all.none(t, 100*time.Millisecond) // what ended before is not sent again

	// Three calls, each seen well within the second a poll would take:
	// the index wakes the follower.
	var ids []string
	for i, sandbox := range []string{"sb1", "sb2", "sb2"} {
		msg := "hello"
		if i == 2 {
			msg = "fail please" // a 400: not 2xx
		}
		id := e.call(t, sandbox, "", "a", i == 1, msg)
		ids = append(ids, id)
		indexed := time.Now()
		cursor, x := all.next(t, 5*time.Second)
		if took := time.Since(indexed); took > 300*time.Millisecond {
			t.Errorf("exchange %d reached the follower %s after it was indexed", i, took)
		}
		if x.ID != id || x.State != "complete" || cursor == "" {
			t.Errorf("exchange %d: %s %+v, want %s", i, cursor, x, id)
		}
	}
	if _, x := sb2.next(t, 5*time.Second); x.ID != ids[1] {
		t.Errorf("filtered follower got %s, want %s", x.ID, ids[1])
	}
	sb2.none(t, 100*time.Millisecond) // sb1's and the 400 are not its

	// Resuming after a cursor sends what came after it; ?last= what ended
	// last before the stream began.
	rec := get(t, h, "/api/v1/llm/exchanges?limit=1")
	var l api.LLMExchangeList
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || l.FollowCursor == "" {
		t.Fatalf("list: %s", rec.Body)
	}
	resumed := follow(t, base, "?after=0", http.Header{"Last-Event-ID": {"1"}}) // the header wins
	var got []string
	for range 3 {
		_, x := resumed.next(t, 5*time.Second)
		got = append(got, x.ID)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("after the first (-want +got):\n%s", diff)
	}
	last := follow(t, base, "?last=2&sandbox=sb1", nil)
	got = nil
	for range 2 {
		_, x := last.next(t, 5*time.Second)
		got = append(got, x.ID)
	}
	if diff := cmp.Diff([]string{old, ids[0]}, got); diff != "" {
		t.Errorf("last 2 of sb1 (-want +got):\n%s", diff)
	}
	fromList := follow(t, base, "?after="+l.FollowCursor, nil)
	fromList.none(t, 100*time.Millisecond)
	later := e.call(t, "sb3", "", "b", false, "after the list")
	if _, x := fromList.next(t, 5*time.Second); x.ID != later {
		t.Errorf("after the list's cursor: %s, want %s", x.ID, later)
	}

	// Every client leaves: every handler returns.
	for _, f := range []*follower{all, sb2, resumed, last, fromList} {
		f.cancel()
	}
	for range 5 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a stream's handler did not return after its client left")
		}
	}
}

func TestLLMStreamBadRequests(t *testing.T) {
	_, h := llmServer(t)
	for _, q := range []string{
		"?status=in_progress", "?status=banana", "?after=x", "?after=-1", "?last=-1", "?last=x", "?last=100000",
		"?limit=5", "?cursor=abc", "?order=desc",
	} {
		rec := get(t, h, "/api/v1/llm/exchanges/stream"+q)
		var body api.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != http.StatusBadRequest || err != nil || body.Code != api.CodeInvalidRequest {
			t.Errorf("%s: %d %s, want 400 INVALID_REQUEST", q, rec.Code, rec.Body)
		}
	}
}
