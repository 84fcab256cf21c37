package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func TestRunRequests(t *testing.T) {
	ctx := context.Background()
	read := func(rc io.ReadCloser, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	tests := []struct {
		name string
		rep  reply
		call func(c *client.Client) (any, error)
		want recorded
		out  any
	}{
		{"submit", reply{status: http.StatusCreated, contentType: "application/json", body: `{"id":"b-1","task":"t","runs":[{"id":"run-1","status":"queued"}]}`},
			func(c *client.Client) (any, error) {
				return c.Runs().Submit(ctx, api.RunSubmitRequest{Task: "name: t", Agents: []string{"custom"}, Repeats: 2})
			},
			recorded{Method: "POST", Path: "/api/v1/runs", ContentType: "application/json", Auth: "Bearer secret",
				Body: `{"task":"name: t","agents":["custom"],"repeats":2}`},
			&api.RunBatch{ID: "b-1", Task: "t", Runs: []api.Run{{ID: "run-1", Status: api.RunQueued}}}},
		{"list", jsonReply(`{"items":[{"id":"run-1","status":"succeeded"}],"next_cursor":"c2"}`),
			func(c *client.Client) (any, error) {
				return c.Runs().List(ctx, client.ListRunsOptions{Batch: "b-1", Limit: 1, Cursor: "c1"})
			},
			recorded{Method: "GET", Path: "/api/v1/runs", Query: "batch=b-1&cursor=c1&limit=1", Auth: "Bearer secret"},
			&api.RunList{Items: []api.Run{{ID: "run-1", Status: api.RunSucceeded}}, NextCursor: "c2"}},
		{"list statuses", jsonReply(`{"items":[{"id":"run-1","status":"failed"}]}`),
			func(c *client.Client) (any, error) {
				return c.Runs().List(ctx, client.ListRunsOptions{Statuses: []api.RunStatus{api.RunFailed, api.RunHung}, Limit: 10, Order: api.OrderDesc})
			},
			recorded{Method: "GET", Path: "/api/v1/runs", Query: "limit=10&order=desc&status=failed&status=hung", Auth: "Bearer secret"},
			&api.RunList{Items: []api.Run{{ID: "run-1", Status: api.RunFailed}}}},
		{"list agents and models", jsonReply(`{"items":[{"id":"run-1","agent":"codex","model":"gpt-5"}]}`),
			func(c *client.Client) (any, error) {
				return c.Runs().List(ctx, client.ListRunsOptions{Agents: []string{"codex", "claude-code"}, Models: []string{"gpt-5"}})
			},
			recorded{Method: "GET", Path: "/api/v1/runs", Query: "agent=codex&agent=claude-code&model=gpt-5", Auth: "Bearer secret"},
			&api.RunList{Items: []api.Run{{ID: "run-1", Agent: "codex", Model: "gpt-5"}}}},
		{"get", jsonReply(`{"id":"run-1","status":"hung","reason":"no progress"}`),
			func(c *client.Client) (any, error) { return c.Runs().Get(ctx, "run-1") },
			recorded{Method: "GET", Path: "/api/v1/runs/run-1", Auth: "Bearer secret"},
			&api.Run{ID: "run-1", Status: api.RunHung, Reason: "no progress"}},
		{"cancel", jsonReply(`{"id":"run-1","status":"cancelled"}`),
			func(c *client.Client) (any, error) { return c.Runs().Cancel(ctx, "run-1") },
			recorded{Method: "POST", Path: "/api/v1/runs/run-1/cancel", Auth: "Bearer secret"},
			&api.Run{ID: "run-1", Status: api.RunCancelled}},
		{"delete", reply{status: http.StatusNoContent},
			func(c *client.Client) (any, error) { return nil, c.Runs().Delete(ctx, "run-1") },
			recorded{Method: "DELETE", Path: "/api/v1/runs/run-1", Auth: "Bearer secret"}, nil},
		{"events", sseReply("event: event\ndata: {\"seq\":1,\"type\":\"phase\",\"phase\":\"agent\"}\n\n" +
			"event: event\ndata: {\"seq\":2,\"type\":\"end\",\"status\":\"succeeded\"}\n\nevent: event\ndata: {\"seq\":3}\n\n"),
			func(c *client.Client) (any, error) {
				var evs []api.RunEvent
				err := c.Runs().Events(ctx, "run-1", func(ev api.RunEvent) error { evs = append(evs, ev); return nil })
				return evs, err
			},
			recorded{Method: "GET", Path: "/api/v1/runs/run-1/events", Auth: "Bearer secret"},
			[]api.RunEvent{{Seq: 1, Type: "phase", Phase: "agent"}, {Seq: 2, Type: "end", Status: api.RunSucceeded}}},
		{"events after", sseReply("id: 5\nevent: event\ndata: {\"seq\":5,\"type\":\"end\",\"status\":\"failed\"}\n\n"),
			func(c *client.Client) (any, error) {
				var evs []api.RunEvent
				err := c.Runs().EventsAfter(ctx, "run-1", 4, func(ev api.RunEvent) error { evs = append(evs, ev); return nil })
				return evs, err
			},
			recorded{Method: "GET", Path: "/api/v1/runs/run-1/events", Query: "after=4", Auth: "Bearer secret"},
			[]api.RunEvent{{Seq: 5, Type: "end", Status: api.RunFailed}}},
		{"logs", reply{status: http.StatusOK, contentType: "text/plain", body: "hello\n"},
			func(c *client.Client) (any, error) { return read(c.Runs().Logs(ctx, "run-1")) },
			recorded{Method: "GET", Path: "/api/v1/runs/run-1/logs", Auth: "Bearer secret"}, "hello\n"},
		{"artifact", reply{status: http.StatusOK, contentType: "application/octet-stream", body: "x"},
			func(c *client.Client) (any, error) {
				return read(c.Runs().Artifact(ctx, "run-1", "/workspace/a b.txt"))
			},
			recorded{Method: "GET", Path: "/api/v1/runs/run-1/artifacts/workspace/a%20b.txt", Auth: "Bearer secret"}, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := fakeDaemon(t, tt.rep)
			got, err := tt.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *rec); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if tt.out != nil {
				if diff := cmp.Diff(tt.out, got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
		})
	}
	c, _ := fakeDaemon(t, reply{status: http.StatusBadRequest, contentType: "application/json",
		body: `{"error":"invalid task: goal: is required","code":"INVALID_REQUEST"}`})
	if _, err := c.Runs().Submit(ctx, api.RunSubmitRequest{Task: "x"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("submit refused: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.Runs().Get(ctx, ""); err == nil {
		t.Error("Get of an empty id sent a request")
	}
}

// TestRunEventsEnded checks that an event stream that ends without the
// run's end event is an error while the run has not ended (the daemon
// stopped), and none once it has (its log lacks the end event).
func TestRunEventsEnded(t *testing.T) {
	tests := []struct {
		name    string
		events  string
		status  api.RunStatus
		wantErr string
	}{
		{name: "end event", events: "event: event\ndata: {\"seq\":1,\"type\":\"end\",\"status\":\"succeeded\"}\n\n", status: api.RunRunning},
		{name: "cut while running", events: "event: event\ndata: {\"seq\":1,\"type\":\"phase\"}\n\n", status: api.RunRunning,
			wantErr: "follow run run-1: the event stream ended before the run did"},
		{name: "cut once ended", events: "event: event\ndata: {\"seq\":1,\"type\":\"phase\"}\n\n", status: api.RunFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /api/v1/runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.events)
			})
			mux.HandleFunc("GET /api/v1/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(api.Run{ID: r.PathValue("id"), Status: tt.status})
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			err = c.Runs().Events(t.Context(), "run-1", func(api.RunEvent) error { n++; return nil })
			if got := fmt.Sprint(err); tt.wantErr == "" && err != nil || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("Events: %v, want %q", err, tt.wantErr)
			}
			if n != 1 {
				t.Errorf("passed %d events, want 1", n)
			}
		})
	}
}
