package client_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func TestLLMRequests(t *testing.T) {
	ctx := context.Background()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		rep  reply
		call func(c *client.Client) (any, error)
		want recorded
		out  any
	}{
		{"list", jsonReply(`{"items":[{"id":"llx_1","format":"anthropic","status":200,"state":"complete"}],"nextCursor":"c2"}`),
			func(c *client.Client) (any, error) {
				return c.LLM().List(ctx, client.LLMFilter{Sandbox: "sb1", Run: "r1", Model: "m", Status: "4xx", Since: since, Limit: 10, Cursor: "c1", Order: api.OrderDesc})
			},
			recorded{Method: "GET", Path: "/api/v1/llm/exchanges", Auth: "Bearer secret",
				Query: "cursor=c1&limit=10&model=m&order=desc&run=r1&sandbox=sb1&since=2026-01-02T03%3A04%3A05Z&status=4xx"},
			&api.LLMExchangeList{Items: []api.LLMExchange{{ID: "llx_1", Format: "anthropic", Status: 200, State: "complete"}}, NextCursor: "c2"}},
		{"keys, a page", jsonReply(`{"items":[{"id":"llmk_1","name":"ci"}],"next_cursor":"c2"}`),
			func(c *client.Client) (any, error) {
				return c.LLMKeys().ListPage(ctx, client.ListLLMKeysOptions{Limit: 1, Cursor: "c1", Order: api.OrderAsc})
			},
			recorded{Method: "GET", Path: "/api/v1/llm/keys", Query: "cursor=c1&limit=1&order=asc", Auth: "Bearer secret"},
			&api.LLMKeyList{Items: []api.LLMKey{{ID: "llmk_1", Name: "ci"}}, NextCursor: "c2"}},
		{"keys", jsonReply(`{"items":[{"id":"llmk_1","name":"ci"}]}`),
			func(c *client.Client) (any, error) { return c.LLMKeys().List(ctx) },
			recorded{Method: "GET", Path: "/api/v1/llm/keys", Auth: "Bearer secret"},
			[]api.LLMKey{{ID: "llmk_1", Name: "ci"}}},
		{"get", jsonReply(`{"id":"llx_1","request":{"method":"POST","body":"{}"}}`),
			func(c *client.Client) (any, error) { return c.LLM().Get(ctx, "llx_1") },
			recorded{Method: "GET", Path: "/api/v1/llm/exchanges/llx_1", Auth: "Bearer secret"},
			&api.LLMExchangeDetail{LLMExchange: api.LLMExchange{ID: "llx_1"}, Request: &api.LLMMessage{Method: "POST", Body: "{}"}}},
		{"raw", reply{status: http.StatusOK, contentType: "text/event-stream", body: "data: 1\n\n"},
			func(c *client.Client) (any, error) { return c.LLM().Raw(ctx, "llx_1", api.LLMPartResponse) },
			recorded{Method: "GET", Path: "/api/v1/llm/exchanges/llx_1", Query: "raw=response", Auth: "Bearer secret"},
			[]byte("data: 1\n\n")},
		{"conversations", jsonReply(`{"items":[{"id":"llx_1","exchanges":[{"id":"llx_1"}]}]}`),
			func(c *client.Client) (any, error) { return c.LLM().Conversations(ctx, "sb1") },
			recorded{Method: "GET", Path: "/api/v1/sandboxes/sb1/conversations", Auth: "Bearer secret"},
			[]api.LLMConversation{{ID: "llx_1", Exchanges: []api.LLMExchange{{ID: "llx_1"}}}}},
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
			if diff := cmp.Diff(tt.out, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLLMExport(t *testing.T) {
	ctx := context.Background()
	c, rec := fakeDaemon(t, reply{status: 200, contentType: "application/x-ndjson", body: "{\"id\":\"a\"}\n{\"id\":\"b\"}\n"})
	var buf bytes.Buffer
	n, err := c.LLM().Export(ctx, client.LLMFilter{Sandbox: "sb1"}, &buf)
	if err != nil || n != 2 || buf.String() != "{\"id\":\"a\"}\n{\"id\":\"b\"}\n" {
		t.Errorf("export: %d %q %v", n, buf.String(), err)
	}
	if rec.Path != "/api/v1/llm/exchanges/export" || rec.Query != "sandbox=sb1" {
		t.Errorf("request %+v", rec)
	}
	var ids []string
	if err := c.LLM().ExportEach(ctx, client.LLMFilter{}, func(d *api.LLMExchangeDetail) error {
		ids = append(ids, d.ID)
		return nil
	}); err != nil || !cmp.Equal(ids, []string{"a", "b"}) {
		t.Errorf("export each: %v %v", ids, err)
	}
	// A stream cut mid-line is an error, never a whole export.
	c, _ = fakeDaemon(t, reply{status: 200, contentType: "application/x-ndjson", body: "{\"id\":\"a\"}\n{\"id\""})
	if n, err := c.LLM().Export(ctx, client.LLMFilter{}, &bytes.Buffer{}); err == nil || n != 1 {
		t.Errorf("cut export: %d, %v", n, err)
	}
}

func TestLLMFollow(t *testing.T) {
	ctx := context.Background()
	body := ": keep-alive\n\nevent: exchange\nid: 7\ndata: {\"id\":\"a\",\"state\":\"complete\"}\n\n" +
		"event: exchange\nid: 9\ndata: {\"id\":\"b\",\"state\":\"client_gone\"}\n\n" +
		"event: error\ndata: {\"error\":\"archive closed\",\"code\":\"INTERNAL_ERROR\"}\n\n"
	c, rec := fakeDaemon(t, reply{status: 200, contentType: "text/event-stream", body: body})
	var got []string
	err := c.LLM().Follow(ctx, client.LLMFilter{Sandbox: "sb1"}, client.LLMFollowFrom{After: "5", Last: 3},
		func(cursor string, x api.LLMExchange) error {
			got = append(got, cursor+"="+x.ID+"/"+x.State)
			return nil
		})
	if err == nil || !strings.Contains(err.Error(), "archive closed") {
		t.Errorf("follow = %v, want the stream's error", err)
	}
	if diff := cmp.Diff([]string{"7=a/complete", "9=b/client_gone"}, got); diff != "" {
		t.Errorf("exchanges (-want +got):\n%s", diff)
	}
	want := recorded{Method: "GET", Path: "/api/v1/llm/exchanges/stream", Query: "after=5&last=3&sandbox=sb1", Auth: "Bearer secret"}
	if diff := cmp.Diff(want, *rec); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	// A stream that ends without an error event is not a clean end: the
	// daemon never ends one.
	c, _ = fakeDaemon(t, reply{status: 200, contentType: "text/event-stream", body: "event: exchange\nid: 1\ndata: {\"id\":\"a\"}\n\n"})
	if err := c.LLM().Follow(ctx, client.LLMFilter{}, client.LLMFollowFrom{}, func(string, api.LLMExchange) error { return nil }); err == nil {
		t.Error("follow of a stream that ended: nil error")
	}
}
