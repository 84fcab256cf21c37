package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store/sqlite"
	"github.com/agent2env/agent2env/internal/testenv"
)

// llmDaemon is the daemon's archive API over a real archive, filled
// through a real proxy; call makes one exchange of sandbox sb.
type llmDaemon struct {
	arc   *archive.Archive
	proxy string
}

func newLLMDaemon(t *testing.T) *llmDaemon {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	arc, err := archive.Open(context.Background(), archive.Config{
		Dir: filepath.Join(t.TempDir(), "llm"), Log: slog.New(slog.DiscardHandler),
	}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arc.Close() })
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "real", Content: []llm.Part{llm.Text("hello there")}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 12, OutputTokens: 3}}, nil
	})
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "coder", Provider: "up"}},
	}, proxy.WithRecorder(arc))
	if err != nil {
		t.Fatal(err)
	}
	ps := httptest.NewServer(llmtest.WithTestCaller(p))
	t.Cleanup(ps.Close)
	api := httpapi.New(nil, nil, slog.New(slog.DiscardHandler), httpapi.WithRoutes(httpapi.NewLLMArchiveRoutes(service.NewLLMExchanges(arc))))
	api.SetReady(true)
	as := httptest.NewServer(api.Handler())
	t.Cleanup(as.Close)
	t.Setenv(client.EnvURL, as.URL)
	t.Setenv(client.EnvToken, "")
	return &llmDaemon{arc: arc, proxy: ps.URL}
}

func (d *llmDaemon) call(t *testing.T, sb string, stream bool) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.proxy+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":"coder","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)))
	req.Header.Set("X-Test-Sandbox", sb)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := d.arc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLLMCommands(t *testing.T) {
	d := newLLMDaemon(t)
	d.call(t, "sb-one", false)
	d.call(t, "sb-two", true)

	code, out, errOut := run(t, "llm", "ls")
	if code != 0 || !strings.Contains(out, "TOKENS IN/OUT") || !strings.Contains(out, "sb-one") || !strings.Contains(out, "12/3") {
		t.Fatalf("ls: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, "llm", "ls", "-q", "--sandbox", "sb-two")
	ids := strings.Fields(out)
	if code != 0 || len(ids) != 1 || !strings.HasPrefix(ids[0], "llx_") {
		t.Fatalf("ls -q --sandbox: %d %q", code, out)
	}
	// --newest lists the other way round.
	_, oldest, _ := run(t, "llm", "ls", "-q")
	code, newest, _ := run(t, "llm", "ls", "-q", "--newest")
	if o, n := strings.Fields(oldest), strings.Fields(newest); code != 0 || len(o) != 2 || !slices.Equal(n, []string{o[1], o[0]}) {
		t.Errorf("ls --newest: %d %q; oldest first %q", code, newest, oldest)
	}
	code, out, _ = run(t, "llm", "ls", "--since", "1h", "--status", "2xx", "-o", "json")
	var l api.LLMExchangeList
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Items) != 2 {
		t.Errorf("ls -o json: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"llm", "ls", "--since", "yesterday"}, {"llm", "show", ids[0], "--raw", "everything"}, {"llm", "show"},
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
	if code, _, errOut := run(t, "llm", "ls", "--status", "banana"); code == 0 || !strings.Contains(errOut, "status") {
		t.Errorf("ls --status banana: %d %q", code, errOut)
	}

	code, out, _ = run(t, "llm", "show", ids[0])
	for _, want := range []string{"sandbox:", "sb-two", "--- request: POST /v1/chat/completions", "--- upstream response: 200", "--- response: 200", "data: "} {
		if !strings.Contains(out, want) {
			t.Errorf("show: no %q in\n%s", want, out)
		}
	}
	code, out, _ = run(t, "llm", "show", ids[0], "--raw", "request")
	if code != 0 || out != `{"model":"coder","stream":true,"messages":[{"role":"user","content":"hi"}]}` {
		t.Errorf("show --raw request: %d %q", code, out)
	}

	code, out, _ = run(t, "llm", "export")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("export: %d, %d lines", code, len(lines))
	}
	var x api.LLMExchangeDetail
	if err := json.Unmarshal([]byte(lines[1]), &x); err != nil || x.ID != ids[0] || x.Response == nil {
		t.Errorf("export line: %v %+v", err, x)
	}

	code, out, _ = run(t, "llm", "tail", "-n", "1")
	if code != 0 || !strings.Contains(out, ids[0]) || strings.Count(out, "llx_") != 1 {
		t.Errorf("tail -n 1: %d %q", code, out)
	}
}

// TestLLMTailFollow: tail -f prints each exchange once, when it has
// ended, until interrupted, and then exits as the signal's 128+n.
func TestLLMTailFollow(t *testing.T) {
	d := newLLMDaemon(t)
	d.call(t, "sb-one", false)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var out testenv.Buffer
	cl, err := client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- tailLLM(ctx, env{stdout: &out}, cl, client.LLMFilter{Since: time.Now().Add(-time.Hour)}, 10, true, true)
	}()
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); strings.Count(out.String(), "\n") < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("tail printed %q, want %d lines", out.String(), n)
			}
		}
	}
	waitFor(1)
	d.call(t, "sb-two", true)
	d.call(t, "sb-three", false)
	waitFor(3)
	time.Sleep(50 * time.Millisecond) // nothing is printed again
	cancel(&signalError{sig: os.Interrupt})
	var sig *signalError
	if err := <-done; !errors.As(err, &sig) || sig.code() != 130 {
		t.Fatalf("tail -f interrupted: %v, want the interruption (exit 130)", err)
	}
	var sandboxes []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var x api.LLMExchange
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		sandboxes = append(sandboxes, x.SandboxID)
	}
	if strings.Join(sandboxes, " ") != "sb-one sb-two sb-three" {
		t.Errorf("tail -f printed %v", sandboxes)
	}
}

// TestLLMExportFile checks that export -f writes its file whole or not at
// all: an export cut short leaves the file that was there as it was.
func TestLLMExportFile(t *testing.T) {
	tests := []struct {
		name     string
		body     string // the daemon's export
		wantCode int
		want     string // the file's content after
	}{
		{name: "complete", body: "{\"id\":\"llx_1\"}\n{\"id\":\"llx_2\"}\n", want: "{\"id\":\"llx_1\"}\n{\"id\":\"llx_2\"}\n"},
		{name: "cut short", body: "{\"id\":\"llx_1\"}\n{\"id\":", wantCode: 1, want: "old\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			t.Setenv(client.EnvURL, srv.URL)
			file := filepath.Join(t.TempDir(), "x.jsonl")
			if err := os.WriteFile(file, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := run(t, "llm", "export", "-f", file); code != tt.wantCode {
				t.Errorf("exit %d, want %d: %s", code, tt.wantCode, stderr)
			}
			if got, err := os.ReadFile(file); err != nil || string(got) != tt.want {
				t.Errorf("%s holds %q (err %v), want %q", file, got, err, tt.want)
			}
		})
	}
}
