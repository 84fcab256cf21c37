package client_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

// binaryOutput is command output that is not UTF-8: every byte value,
// then invalid sequences (a lone continuation byte, a cut character, an
// overlong NUL, a surrogate).
var binaryOutput = func() string {
	b := make([]byte, 0, 300)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return string(b) + "\x80 \xe2\x82 \xc0\x80 \xed\xa0\x80 \xe2\x82\xac"
}()

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// recorded is what the fake daemon saw of one request.
type recorded struct {
	Method, Path, Query, ContentType, Auth, Body string
}

// reply is a canned response of the fake daemon.
type reply struct {
	status      int
	contentType string
	body        string
}

// fakeDaemon starts a server that records each request and answers it
// with rep, and returns a Client for it with the given options.
func fakeDaemon(t *testing.T, rep reply, opts ...client.Option) (*client.Client, *recorded) {
	t.Helper()
	rec := new(recorded)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		*rec = recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			ContentType: r.Header.Get("Content-Type"), Auth: r.Header.Get("Authorization"), Body: string(b)}
		if rep.contentType != "" {
			w.Header().Set("Content-Type", rep.contentType)
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, append([]client.Option{client.WithToken("secret")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func jsonReply(body string) reply {
	return reply{status: http.StatusOK, contentType: "application/json", body: body}
}

func sseReply(body string) reply {
	return reply{status: http.StatusOK, contentType: "text/event-stream", body: body}
}

var created = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const sandboxJSON = `{"id":"sb1","image":"alpine","cpu":"1","memory":"512Mi","ttl":60,"status":"running","created_at":"2025-01-02T03:04:05Z"}`

var sandbox = api.Sandbox{ID: "sb1", Image: "alpine", CPU: "1", Memory: "512Mi", TTL: 60, Status: api.StatusRunning, CreatedAt: created}

const imageJSON = `{"ref":"docker.io/library/alpine:3.20","digest":"sha256:d","id":"sha256:i","size":42,"layers":1,"created":"2025-01-02T03:04:05Z"}`

var alpine = api.Image{Ref: "docker.io/library/alpine:3.20", Digest: "sha256:d", ID: "sha256:i", Size: 42, Layers: 1, Created: created}

// execResult is what ExecuteStream returned and wrote.
type execResult struct {
	Exit           *api.ExecEvent
	Stdout, Stderr string
}

// pullResult is what a pull or build returned and reported.
type pullResult struct {
	Image    *api.Image
	Progress []api.ImageProgress
}

func TestRequests(t *testing.T) {
	ttl := 60
	tests := []struct {
		name  string
		reply reply
		call  func(ctx context.Context, c *client.Client) (any, error)
		want  recorded
		out   any
	}{
		{
			name:  "health",
			reply: reply{status: http.StatusOK, contentType: "text/plain", body: "OK"},
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Health(ctx) },
			want:  recorded{Method: "GET", Path: "/health"},
		},
		{
			name:  "create",
			reply: reply{status: http.StatusCreated, contentType: "application/json", body: sandboxJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: "alpine", TTL: &ttl, Env: map[string]string{"A": "1"}})
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes", ContentType: "application/json",
				Body: `{"image":"alpine","ttl":60,"env":{"A":"1"}}`},
			out: &sandbox,
		},
		{
			name:  "list",
			reply: jsonReply(`{"items":[` + sandboxJSON + `]}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Sandbox.List(ctx) },
			want:  recorded{Method: "GET", Path: "/api/v1/sandboxes"},
			out:   []api.Sandbox{sandbox},
		},
		{
			name:  "list a page, selected and newest first",
			reply: jsonReply(`{"items":[` + sandboxJSON + `],"nextCursor":"c2"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.ListPage(ctx, client.ListSandboxesOptions{
					Statuses: []api.SandboxStatus{api.StatusRunning, api.StatusPaused}, Limit: 2, Cursor: "c1", Order: api.OrderDesc,
				})
			},
			want: recorded{Method: "GET", Path: "/api/v1/sandboxes", Query: "cursor=c1&limit=2&order=desc&status=running&status=paused"},
			out:  &api.SandboxList{Items: []api.Sandbox{sandbox}, NextCursor: "c2"},
		},
		{
			name:  "list a page without options",
			reply: jsonReply(`{"items":[]}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.ListPage(ctx, client.ListSandboxesOptions{})
			},
			want: recorded{Method: "GET", Path: "/api/v1/sandboxes"},
			out:  &api.SandboxList{Items: []api.Sandbox{}},
		},
		{
			name:  "get escapes the id",
			reply: jsonReply(sandboxJSON),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Sandbox.Get(ctx, "a/b?") },
			want:  recorded{Method: "GET", Path: "/api/v1/sandboxes/a%2Fb%3F"},
			out:   &sandbox,
		},
		{
			name:  "delete",
			reply: reply{status: http.StatusNoContent},
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Sandbox.Delete(ctx, "sb1") },
			want:  recorded{Method: "DELETE", Path: "/api/v1/sandboxes/sb1"},
		},
		{
			// The SDK asks for base64; a daemon that predates it answers text.
			name:  "execute",
			reply: jsonReply(`{"exit_code":3,"stdout":"out","stderr":"err","duration_ms":1.5}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.Execute(ctx, "sb1", api.ExecRequest{Command: []string{"sh", "-c", "exit 3"}, Timeout: 5, Cwd: "/tmp"})
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/exec", ContentType: "application/json",
				Body: `{"command":["sh","-c","exit 3"],"timeout":5,"cwd":"/tmp","output_encoding":"base64"}`},
			out: &api.ExecResponse{ExitCode: 3, Stdout: "out", Stderr: "err", DurationMS: 1.5},
		},
		{
			name:  "execute binary output",
			reply: jsonReply(`{"exit_code":0,"stdout":"` + b64(binaryOutput) + `","stderr":"/4A=","encoding":"base64"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.Execute(ctx, "sb1", api.ExecRequest{Command: []string{"cat", "f"}})
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/exec", ContentType: "application/json",
				Body: `{"command":["cat","f"],"output_encoding":"base64"}`},
			out: &api.ExecResponse{Stdout: binaryOutput, Stderr: "\xff\x80"},
		},
		{
			name:  "execute as text",
			reply: jsonReply(`{"exit_code":0,"stdout":"\ufffd","stderr":""}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.Execute(ctx, "sb1", api.ExecRequest{Command: []string{"cat", "f"}, OutputEncoding: api.OutputText})
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/exec", ContentType: "application/json",
				Body: `{"command":["cat","f"],"output_encoding":"utf-8"}`},
			out: &api.ExecResponse{Stdout: "\ufffd"},
		},
		{
			name: "execute stream",
			reply: sseReply("event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"hello \"}\n\n" +
				"event: stderr\ndata: {\"type\":\"stderr\",\"data\":\"oops\\n\"}\n\n" +
				": keep-alive\n\n" +
				"event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"world\\n\"}\n\n" +
				"event: exit\ndata: {\"type\":\"exit\",\"exit_code\":7,\"duration_ms\":2}\n\n"),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				var out, errOut bytes.Buffer
				ev, err := c.Sandbox.ExecuteStream(ctx, "sb1", api.ExecRequest{Command: []string{"x"}, Env: map[string]string{"K": "V"}}, &out, &errOut)
				return execResult{ev, out.String(), errOut.String()}, err
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/exec/stream", ContentType: "application/json",
				Body: `{"command":["x"],"env":{"K":"V"},"output_encoding":"base64"}`},
			out: execResult{Exit: &api.ExecEvent{Type: "exit", ExitCode: 7, Duration: 2}, Stdout: "hello world\n", Stderr: "oops\n"},
		},
		{
			name: "execute stream binary output",
			reply: sseReply("event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"" + b64(binaryOutput[:100]) + "\",\"encoding\":\"base64\"}\n\n" +
				"event: stderr\ndata: {\"type\":\"stderr\",\"data\":\"/w==\",\"encoding\":\"base64\"}\n\n" +
				"event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"" + b64(binaryOutput[100:]) + "\",\"encoding\":\"base64\"}\n\n" +
				"event: exit\ndata: {\"type\":\"exit\",\"duration_ms\":2}\n\n"),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				var out, errOut bytes.Buffer
				ev, err := c.Sandbox.ExecuteStream(ctx, "sb1", api.ExecRequest{Command: []string{"x"}}, &out, &errOut)
				return execResult{ev, out.String(), errOut.String()}, err
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/exec/stream", ContentType: "application/json",
				Body: `{"command":["x"],"output_encoding":"base64"}`},
			out: execResult{Exit: &api.ExecEvent{Type: "exit", Duration: 2}, Stdout: binaryOutput, Stderr: "\xff"},
		},
		{
			name:  "logs",
			reply: jsonReply(`{"logs":"booted\n","events":["e1","e2"]}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Sandbox.GetLogs(ctx, "sb1") },
			want:  recorded{Method: "GET", Path: "/api/v1/sandboxes/sb1/logs"},
			out:   &api.LogsResponse{Logs: "booted\n", Events: []string{"e1", "e2"}},
		},
		{
			name:  "download",
			reply: reply{status: http.StatusOK, contentType: "application/octet-stream", body: "\x00bytes\xff"},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				rc, err := c.Sandbox.DownloadFile(ctx, "sb1", "/workspace/a b&c")
				if err != nil {
					return nil, err
				}
				defer rc.Close()
				b, err := io.ReadAll(rc)
				return string(b), err
			},
			want: recorded{Method: "GET", Path: "/api/v1/sandboxes/sb1/files", Query: "path=%2Fworkspace%2Fa+b%26c"},
			out:  "\x00bytes\xff",
		},
		{
			name:  "list files",
			reply: jsonReply(`{"items":[{"name":"sub","path":"/workspace/sub","size":4096,"mode":"0755","mod_time":"2026-01-02T03:04:05Z","is_dir":true}]}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.ListFiles(ctx, "sb1", "/workspace")
			},
			want: recorded{Method: "GET", Path: "/api/v1/sandboxes/sb1/files/list", Query: "path=%2Fworkspace"},
			out: []api.FileInfo{{Name: "sub", Path: "/workspace/sub", Size: 4096, Mode: "0755",
				ModTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), IsDir: true}},
		},
		{
			name:  "stat file",
			reply: jsonReply(`{"name":"sub","path":"/workspace/sub","size":4096,"mode":"0755","mod_time":"2026-01-02T03:04:05Z","is_dir":true}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Sandbox.StatFile(ctx, "sb1", "/workspace/sub")
			},
			want: recorded{Method: "GET", Path: "/api/v1/sandboxes/sb1/files/stat", Query: "path=%2Fworkspace%2Fsub"},
			out: &api.FileInfo{Name: "sub", Path: "/workspace/sub", Size: 4096, Mode: "0755",
				ModTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), IsDir: true},
		},
		{
			name:  "image list",
			reply: jsonReply(`{"items":[` + imageJSON + `]}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Image.List(ctx) },
			want:  recorded{Method: "GET", Path: "/api/v1/images"},
			out:   []api.Image{alpine},
		},
		{
			name: "image pull",
			reply: sseReply("event: progress\ndata: {\"phase\":\"resolve\",\"item\":\"alpine\"}\n\n" +
				"event: progress\ndata: {\"phase\":\"download\",\"item\":\"sha256:l\",\"current\":10,\"total\":42}\n\n" +
				"event: image\ndata: " + imageJSON + "\n\n"),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				var ps []api.ImageProgress
				img, err := c.Image.Pull(ctx, "alpine:3.20", func(p api.ImageProgress) { ps = append(ps, p) })
				return pullResult{img, ps}, err
			},
			want: recorded{Method: "POST", Path: "/api/v1/images/pull", ContentType: "application/json", Body: `{"ref":"alpine:3.20"}`},
			out: pullResult{Image: &alpine, Progress: []api.ImageProgress{
				{Phase: "resolve", Item: "alpine"}, {Phase: "download", Item: "sha256:l", Current: 10, Total: 42},
			}},
		},
		{
			name:  "image build without progress func",
			reply: sseReply("event: progress\ndata: {\"phase\":\"build\",\"item\":\"step\"}\n\nevent: image\ndata: " + imageJSON + "\n\n"),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Image.Build(ctx, "agent2env/python", nil)
			},
			want: recorded{Method: "POST", Path: "/api/v1/images/build", ContentType: "application/json", Body: `{"ref":"agent2env/python"}`},
			out:  &alpine,
		},
		{
			name:  "image import",
			reply: sseReply("event: image\ndata: " + imageJSON + "\n\nevent: image\ndata: " + imageJSON + "\n\n"),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Image.Import(ctx, strings.NewReader("tarball bytes"), nil)
			},
			want: recorded{Method: "POST", Path: "/api/v1/images/import", ContentType: "application/x-tar", Body: "tarball bytes"},
			out:  []api.Image{alpine, alpine},
		},
		{
			name:  "image remove keeps the ref's slashes",
			reply: reply{status: http.StatusNoContent},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return nil, c.Image.Remove(ctx, "docker.io/library/alpine:3.20")
			},
			want: recorded{Method: "DELETE", Path: "/api/v1/images/docker.io/library/alpine:3.20"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := fakeDaemon(t, tt.reply)
			out, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Auth = "Bearer secret"
			if diff := cmp.Diff(tt.want, *rec); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.out, out); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	tests := []struct {
		base string
		want string // path of a list request
	}{
		{"%s", "/api/v1/sandboxes"},
		{"%s/", "/api/v1/sandboxes"},
		{"%s/api/v1", "/api/v1/sandboxes"},
		{"%s/api/v1/", "/api/v1/sandboxes"},
		{"%s/proxy", "/proxy/api/v1/sandboxes"},
		{"%s/proxy/api/v1", "/proxy/api/v1/sandboxes"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			var got string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.URL.Path
				io.WriteString(w, `{"items":[]}`)
			}))
			defer srv.Close()
			c, err := client.New(strings.Replace(tt.base, "%s", srv.URL, 1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Sandbox.List(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("path %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "http://[::1"} {
		if _, err := client.New(base); err == nil {
			t.Errorf("New(%q) succeeded, want an error", base)
		}
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		opts  []client.Option
		want  http.Header
		check []string
	}{
		{
			name: "defaults",
			want: http.Header{"User-Agent": {"agent2env-go-client"}},
		},
		{
			name: "options",
			opts: []client.Option{client.WithToken("t0k"), client.WithUserAgent("ua/1"), client.WithHeader("X-Trace", "abc")},
			want: http.Header{"Authorization": {"Bearer t0k"}, "User-Agent": {"ua/1"}, "X-Trace": {"abc"}},
		},
		{
			name: "env token",
			env:  map[string]string{client.EnvToken: "fromenv"},
			want: http.Header{"Authorization": {"Bearer fromenv"}, "User-Agent": {"agent2env-go-client"}},
		},
		{
			name: "option overrides env token",
			env:  map[string]string{client.EnvToken: "fromenv"},
			opts: []client.Option{client.WithToken("")},
			want: http.Header{"User-Agent": {"agent2env-go-client"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(http.Header)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, k := range []string{"Authorization", "User-Agent", "X-Trace"} {
					if v := r.Header.Values(k); len(v) > 0 {
						got[k] = v
					}
				}
				io.WriteString(w, "OK")
			}))
			defer srv.Close()
			t.Setenv(client.EnvURL, srv.URL)
			t.Setenv(client.EnvToken, "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := client.FromEnv(tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Health(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithHTTPClient(t *testing.T) {
	var used bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("OK")), Request: r}, nil
	})}
	c, err := client.New("http://daemon.invalid", client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(t.Context()); err != nil || !used {
		t.Errorf("Health: err %v, custom client used %v", err, used)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestEmptyIDs(t *testing.T) {
	c, err := client.New("http://daemon.invalid")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := map[string]func() error{
		"get":    func() error { _, err := c.Sandbox.Get(ctx, ""); return err },
		"delete": func() error { return c.Sandbox.Delete(ctx, "") },
		"exec":   func() error { _, err := c.Sandbox.Execute(ctx, "", api.ExecRequest{}); return err },
		"upload": func() error {
			_, err := c.Sandbox.UploadFile(ctx, "sb1", "", strings.NewReader(""), 0)
			return err
		},
		"image rm": func() error { return c.Image.Remove(ctx, "") },
	}
	for name, call := range calls {
		if err := call(); err == nil || errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s: err %v, want a local error", name, err)
		}
	}
}
