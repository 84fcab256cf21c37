package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/testenv"
)

// consoleModelSays is what the fake model answers once it has its tool's
// result: markup the console must show as text.
const consoleModelSays = "<script>window.__xss = 4</script><i>fixed</i>"

// chromium is Debian's chromium package's browser (scripts/deps.sh --tests), which
// the console's browser tests drive: nothing downloads a browser.
const chromium = "/usr/bin/chromium"

// consolePages are the screenshots the browser tests must leave: one of
// every page a person looks at.
var consolePages = []string{"overview", "sandboxes", "sandbox", "terminal", "files", "sandbox-snapshots", "snapshots", "templates", "template",
	"images", "sessions", "runs", "run", "compare", "compare-transcripts", "conversations", "conversation", "archive"}

// TestConsoleInBrowser drives the web console in a real browser
// (web/test/console.test.mjs: playwright-core on Debian's chromium, under
// Node's test runner) against a daemon with API keys on and a fake model:
// the key prompt, a sandbox created from the console, its terminal, its
// files browsed folder by folder with an upload and a download, a snapshot
// of it taken on its page, a new sandbox made from it (with the project's
// criu: requireCRIU) and the snapshots listed, a task run
// followed live, a conversation's transcript with its tool call paired
// with its result and its raw parts, templates, images and prepulls,
// sessions and contexts, a submission's compare matrix of two agents
// (custom, and opencode's CLI, absent from the python image, failing with
// its reason) by two models, the LLM archive's live tail and its pages
// (newest first, pages of two: one that ends while shown at the top of the
// first page, no tail on the older pages), the overview's
// warm pool (python, of one sandbox) and recent failures (one page of each
// list, newest first), the runs and sandboxes lists newest first (pages of
// two: a new sandbox on the first page at once, older ones on the next
// pages), and text an
// agent or a model wrote shown as text. The screenshots of its pages (every
// page of the navigation, a sandbox with its terminal and its files, a run,
// a submission's matrix, conversations) go to screenshotDir, whose files
// the test logs. The browser tests run in a network namespace
// of their own (browserNetns).
func TestConsoleInBrowser(t *testing.T) {
	nodeBin := os.Getenv("AGENT2ENV_NODE_BIN")
	if nodeBin == "" {
		testenv.Missing(t, "AGENT2ENV_NODE_BIN is not set: the console's browser tests need the pinned Node.js and web/node_modules (make test sets it: AGENT2ENV_NODE_BIN=$(scripts/web.sh deps))")
	}
	if _, err := os.Stat(chromium); err != nil {
		testenv.Missing(t, "%s is missing: the console's browser tests need Debian's chromium (scripts/deps.sh --tests installs it)", chromium)
	}
	// A model that calls a tool first, then answers with markup.
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(req *llm.Request) (*llm.Response, *llm.Error) {
		if len(req.Messages) < 3 {
			return &llm.Response{ID: "r1", Model: "qwen", StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 7, OutputTokens: 3},
				Content: []llm.Part{{Type: llm.PartToolCall, ID: "call_1", Name: "read_file", Arguments: `{"path":"/etc/hostname"}`}}}, nil
		}
		return &llm.Response{ID: "r2", Model: "qwen", StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 12, OutputTokens: 5},
			Content: []llm.Part{llm.Text(consoleModelSays)}}, nil
	})
	llmConfig := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(llmConfig, []byte("providers:\n  - {name: fake, type: openai, base_url: "+up.URL+"}\nmodels:\n  - {name: coder, provider: fake, model: qwen}\n  - {name: coder-b, provider: fake, model: qwen}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const key = "console-browser-test-key"
	requireCRIU(t)
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key)
		c.Args = append(c.Args, "--console-listen", "127.0.0.1:0", "--prebuild-images=false", "--llm-config", llmConfig,
			"--warm-pools", "python=1")
	})
	d.key = key
	consoleAddr := strings.TrimSuffix(strings.TrimPrefix(d.waitLogged("console", "url"), "http://"), "/")
	// The image is built or unpacked once, here, not while the browser
	// waits.
	warm := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	d.do("DELETE", "/api/v1/sandboxes/"+warm.ID, nil, nil)

	shots := screenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	web, err := filepath.Abs("../../web")
	if err != nil {
		t.Fatal(err)
	}
	// The browser tests run in a network namespace of their own: Chromium
	// fails requests, loopback ones too, with ERR_NETWORK_CHANGED when the
	// host's interfaces and addresses change, as tests running beside this
	// one (the Kubernetes node tests') change them all the time.
	ns := browserNetns(t, consoleAddr, d.addr)
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+ns, "--", filepath.Join(nodeBin, "node"), "--test", "--test-reporter=spec", "test/console.test.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(),
		"CONSOLE_URL=http://"+consoleAddr,
		"API_URL="+d.url(""),
		"API_KEY="+key,
		"IMAGE=agent2env/python",
		"CHROMIUM="+chromium,
		"SCREENSHOT_DIR="+shots,
		"MODEL=coder",
		"MODEL_B=coder-b",
		"MODEL_SAYS="+consoleModelSays,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("browser tests:\n%s", out)
	if err != nil {
		t.Errorf("browser tests: %v", err)
	}
	pngs, _ := filepath.Glob(filepath.Join(shots, "*.png"))
	for _, p := range pngs {
		t.Logf("screenshot: %s", p)
	}
	if len(pngs) == 0 {
		t.Errorf("no screenshot in %s", shots)
	}
	for _, name := range consolePages {
		if _, err := os.Stat(filepath.Join(shots, name+".png")); err != nil {
			t.Errorf("no screenshot of the page %s: %v", name, err)
		}
	}
	d.deleteAll()
}

// screenshotDir is where the browser tests save their screenshots:
// $AGENT2ENV_SCREENSHOT_DIR when set, kept; otherwise a temporary
// directory that is removed when the test passes and kept, for a person
// to look at, when it fails.
func screenshotDir(t *testing.T) string {
	if dir := os.Getenv("AGENT2ENV_SCREENSHOT_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "a2e-console-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the screenshots are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// browserNetns makes a network namespace for the browser tests, where no
// change to the host's interfaces is seen, and returns its path. Each of
// addrs, the daemon's on the host's loopback, is forwarded from the same
// address on the namespace's: the page's origins, which the daemon's CORS
// and the console's Content-Security-Policy name, are the same there.
func browserNetns(t *testing.T, addrs ...string) string {
	t.Helper()
	ns, err := testenv.Netns(t)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, addr := range addrs {
		l, err := testenv.ListenIn(ns, addr)
		if err != nil {
			t.Fatalf("listen on %s in the browser's network namespace: %v", addr, err)
		}
		var d net.Dialer
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := agent.Forward(ctx, l, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) })
			if err != nil {
				t.Errorf("forward %s to the browser's network namespace: %v", addr, err)
			}
		}()
	}
	return ns
}
