package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func TestSessionRequests(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		rep  reply
		call func(c *client.Client) (any, error)
		want recorded
		out  any
	}{
		{"execute code", jsonReply(`{"session_id":"s1","created":true,"language":"python","output":{"stdout":"1\n","stderr":""},"success":true}`),
			func(c *client.Client) (any, error) {
				return c.Sessions().ExecuteCode(ctx, api.SessionExecuteRequest{Code: "print(1)", SessionID: "s1"})
			},
			recorded{Method: "POST", Path: "/api/v1/sessions/execute", ContentType: "application/json", Auth: "Bearer secret",
				Body: `{"code":"print(1)","session_id":"s1"}`},
			&api.SessionExecuteResponse{SessionInfo: api.SessionInfo{SessionID: "s1", Created: true}, Language: "python",
				ExecuteResponse: api.ExecuteResponse{Output: api.ExecutionOutput{Stdout: "1\n"}, Success: true}}},
		{"execute command", jsonReply(`{"session_id":"s1","created":false,"exit_code":2,"stdout":"","stderr":"x"}`),
			func(c *client.Client) (any, error) {
				return c.Sessions().ExecuteCommand(ctx, api.SessionCommandRequest{Command: api.CommandLine{Shell: "ls"}, SessionID: "s1"})
			},
			recorded{Method: "POST", Path: "/api/v1/sessions/command", ContentType: "application/json", Auth: "Bearer secret",
				Body: `{"command":"ls","session_id":"s1","output_encoding":"base64"}`},
			&api.SessionCommandResponse{SessionInfo: api.SessionInfo{SessionID: "s1"}, ExecResponse: api.ExecResponse{ExitCode: 2, Stderr: "x"}}},
		{"execute command, binary output",
			jsonReply(`{"session_id":"s1","exit_code":0,"stdout":"` + b64(binaryOutput) + `","stderr":"","encoding":"base64"}`),
			func(c *client.Client) (any, error) {
				return c.Sessions().ExecuteCommand(ctx, api.SessionCommandRequest{Command: api.CommandLine{Argv: []string{"cat", "f"}}, SessionID: "s1"})
			},
			recorded{Method: "POST", Path: "/api/v1/sessions/command", ContentType: "application/json", Auth: "Bearer secret",
				Body: `{"command":["cat","f"],"session_id":"s1","output_encoding":"base64"}`},
			&api.SessionCommandResponse{SessionInfo: api.SessionInfo{SessionID: "s1"}, ExecResponse: api.ExecResponse{Stdout: binaryOutput}}},
		{"get", jsonReply(`{"session_id":"a b","flavor":"small"}`),
			func(c *client.Client) (any, error) { return c.Sessions().Get(ctx, "a b") },
			recorded{Method: "GET", Path: "/api/v1/sessions/a%20b", Auth: "Bearer secret"},
			&api.Session{SessionID: "a b", Flavor: "small"}},
		{"list", jsonReply(`{"items":[{"session_id":"s1"}],"total":1}`),
			func(c *client.Client) (any, error) { return c.Sessions().List(ctx) },
			recorded{Method: "GET", Path: "/api/v1/sessions", Auth: "Bearer secret"},
			[]api.Session{{SessionID: "s1"}}},
		{"list a page", jsonReply(`{"items":[{"session_id":"s1"}],"total":1,"next_cursor":"c2"}`),
			func(c *client.Client) (any, error) {
				return c.Sessions().ListPage(ctx, client.ListSessionsOptions{Limit: 1, Cursor: "c1", Order: api.OrderDesc})
			},
			recorded{Method: "GET", Path: "/api/v1/sessions", Query: "cursor=c1&limit=1&order=desc", Auth: "Bearer secret"},
			&api.SessionList{Items: []api.Session{{SessionID: "s1"}}, Total: 1, NextCursor: "c2"}},
		{"keep alive", jsonReply(`{"session_id":"s1","idle_timeout":60}`),
			func(c *client.Client) (any, error) {
				return c.Sessions().KeepAlive(ctx, "s1", api.KeepAliveRequest{IdleTimeout: 60})
			},
			recorded{Method: "POST", Path: "/api/v1/sessions/s1/keepalive", ContentType: "application/json", Auth: "Bearer secret",
				Body: `{"idle_timeout":60}`},
			&api.Session{SessionID: "s1", IdleTimeout: 60}},
		{"delete", jsonReply(`{"session_id":"s1","status":"deleted"}`),
			func(c *client.Client) (any, error) { return nil, c.Sessions().Delete(ctx, "s1") },
			recorded{Method: "DELETE", Path: "/api/v1/sessions/s1", Auth: "Bearer secret"}, nil},
		{"stats", jsonReply(`{"sessions":{"active":2,"busy":1},"sandboxes":{"running":2}}`),
			func(c *client.Client) (any, error) { return c.Stats(ctx) },
			recorded{Method: "GET", Path: "/api/v1/stats", Auth: "Bearer secret"},
			&api.Stats{Sessions: api.SessionStats{Active: 2, Busy: 1}, Sandboxes: map[string]int{"running": 2}}},
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
	c, _ := fakeDaemon(t, jsonReply(`{}`))
	if _, err := c.Sessions().Get(ctx, ""); err == nil {
		t.Error("Get of an empty id sent a request")
	}
}

func TestFromEnvSeedNames(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		io.WriteString(w, "OK")
	}))
	defer srv.Close()
	for _, tt := range []struct {
		env      map[string]string
		wantAuth string
	}{
		{map[string]string{"MSB_SERVER_URL": srv.URL, "MSB_API_KEY": "msb"}, "Bearer msb"},
		{map[string]string{"SANDBOX_BASE_URL": srv.URL}, ""},
		{map[string]string{"AGENT2ENV_URL": srv.URL, "MSB_SERVER_URL": "http://127.0.0.1:1", "AGENT2ENV_TOKEN": "a2e", "MSB_API_KEY": "msb"}, "Bearer a2e"},
	} {
		for _, k := range []string{"AGENT2ENV_URL", "AGENT2ENV_TOKEN", "MSB_SERVER_URL", "MSB_API_KEY", "SANDBOX_BASE_URL"} {
			t.Setenv(k, tt.env[k])
		}
		c, err := client.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Health(context.Background()); err != nil || auth != tt.wantAuth {
			t.Errorf("env %v: health %v, auth %q; want %q", tt.env, err, auth, tt.wantAuth)
		}
		// HTTPClient sends the token to endpoints the SDK does not wrap.
		auth = ""
		resp, err := c.HTTPClient().Get(c.URL("/mcp"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if auth != tt.wantAuth {
			t.Errorf("env %v: HTTPClient sent %q", tt.env, auth)
		}
	}
	for in, want := range map[string]float64{"30": 30, "2.5": 2.5, "1m30s": 90, "500ms": 0.5, "": 0, "-1": 0, "-1m": 0, "soon": 0} {
		t.Setenv("SANDBOX_TIMEOUT", in)
		if got, ok := client.TimeoutFromEnv(); got != want || ok != (want > 0) {
			t.Errorf("TimeoutFromEnv with %q = %v, %v; want %v", in, got, ok, want)
		}
	}
}
