package e2e

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestSeed001Flow replays seed 001's curl session word for word: health,
// create, execute, list, delete, and an execute after the delete.
func TestSeed001Flow(t *testing.T) {
	d := startDaemon(t, "")
	resp, err := http.Get(d.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "OK" {
		t.Fatalf("GET /health = %q, want OK", body)
	}

	var ctx api.Context
	code := d.do("POST", "/api/v1/contexts", `{
    "type": "jupyter",
    "language": "python",
    "session_name": "test-session",
    "working_dir": "/workspace"
  }`, &ctx)
	if code != http.StatusCreated || !strings.HasPrefix(ctx.ContextID, "ctx-") || ctx.Type != "jupyter" ||
		ctx.Status != "active" || ctx.CreatedAt.IsZero() {
		t.Fatalf("create context: %d %+v", code, ctx)
	}

	var res api.ExecuteResponse
	code = d.do("POST", "/api/v1/contexts/"+ctx.ContextID+"/execute", `{
    "code": "print(\"Hello from Local Sandbox\")",
    "timeout": 30
  }`, &res)
	if code != http.StatusOK || res.Output.Stdout != "Hello from Local Sandbox\n" || res.Output.Stderr != "" ||
		!res.Success || res.ExecutionTime <= 0 || res.ExecutionTime > 30 {
		t.Fatalf("execute: %d %+v", code, res)
	}

	var list api.ContextList
	if code := d.do("GET", "/api/v1/contexts", nil, &list); code != http.StatusOK || len(list.Contexts) != 1 ||
		list.Contexts[0].ContextID != ctx.ContextID || len(list.Items) != 1 {
		t.Fatalf("list: %d %+v", code, list)
	}

	if code := d.do("DELETE", "/api/v1/contexts/"+ctx.ContextID, nil, nil); code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}
	var e api.Error
	code = d.do("POST", "/api/v1/contexts/"+ctx.ContextID+"/execute", `{"code": "print(1)", "timeout": 30}`, &e)
	if code != http.StatusNotFound || e.Code != api.CodeContextNotFound {
		t.Fatalf("execute after delete: %d %+v, want 404 %s", code, e, api.CodeContextNotFound)
	}
	// The sandbox made for the session went with its last context.
	var sbs api.List[api.Sandbox]
	if d.do("GET", "/api/v1/sandboxes", nil, &sbs); len(sbs.Items) != 0 {
		t.Errorf("sandboxes left: %+v", sbs.Items)
	}
	d.assertNoLeaks()
}

// execute runs code in a context and returns the response.
func (d *daemon) execute(path, code string, timeout float64) api.ExecuteResponse {
	d.t.Helper()
	var res api.ExecuteResponse
	if status := d.do("POST", path+"/execute", api.ExecuteRequest{Code: code, Timeout: timeout}, &res); status != http.StatusOK {
		d.t.Fatalf("execute %q: status %d", code, status)
	}
	return res
}

func (d *daemon) newContext(path string, req api.CreateContextRequest) api.Context {
	d.t.Helper()
	var c api.Context
	if status := d.do("POST", path, req, &c); status != http.StatusCreated {
		d.t.Fatalf("create context %+v: status %d", req, status)
	}
	return c
}

func TestContexts(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python", Memory: "512Mi"})
	sbPath := "/api/v1/sandboxes/" + sb.ID
	py := d.newContext(sbPath+"/contexts", api.CreateContextRequest{Language: "python"})
	pyPath := "/api/v1/contexts/" + py.ContextID

	t.Run("python state, values, errors", func(t *testing.T) {
		steps := []struct {
			code       string
			timeout    float64
			wantOut    string
			wantResult string
			wantError  string
			wantKind   string
		}{
			{code: "import numpy as np\nx = np.arange(4)", wantOut: ""},
			{code: "print(x.sum())\nx * 2", wantOut: "6\n", wantResult: "array([0, 2, 4, 6])"},
			{code: "print('héllo 世界 🎉')", wantOut: "héllo 世界 🎉\n"},
			{code: "def f():\n    return {}['k']\nf()", wantError: "KeyError", wantKind: api.ErrorKindRuntime},
			{code: "if True print(1)", wantError: "SyntaxError", wantKind: api.ErrorKindSyntax},
			{code: "while True:\n    pass", timeout: 0.5, wantError: api.ErrorNameTimeout, wantKind: api.ErrorKindSystem},
			{code: "import time\ntime.sleep(60)", timeout: 0.5, wantError: api.ErrorNameTimeout, wantKind: api.ErrorKindSystem},
			{code: "int(x.sum())", wantResult: "6"},
		}
		for i, st := range steps {
			res := d.execute(pyPath, st.code, st.timeout)
			if st.wantError == "" {
				if !res.Success || res.Output.Stdout != st.wantOut || res.Result != st.wantResult || res.StateLost {
					t.Errorf("step %d %q: %+v", i, st.code, res)
				}
				continue
			}
			if res.Success || res.Error == nil || res.Error.Name != st.wantError || res.Error.Kind != st.wantKind || res.StateLost {
				t.Errorf("step %d %q: %+v, want %s", i, st.code, res, st.wantError)
			}
		}
	})

	t.Run("pip install, imported in the next cell", func(t *testing.T) {
		// A wheel made in the sandbox (it has no network), installed by
		// pip as the sandbox's user: Debian's PEP 668 marker would refuse
		// it, and the user site-packages pip makes did not exist when the
		// kernel started.
		install := `import subprocess, sys, zipfile
whl = "/tmp/a2e_wheel-1.0-py3-none-any.whl"
with zipfile.ZipFile(whl, "w") as z:
    z.writestr("a2e_wheel.py", "ANSWER = 42\n")
    z.writestr("a2e_wheel-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: a2e-wheel\nVersion: 1.0\n")
    z.writestr("a2e_wheel-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("a2e_wheel-1.0.dist-info/RECORD", "")
p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-warn-script-location", whl], capture_output=True, text=True)
print(p.returncode, p.stderr[-300:])`
		if res := d.execute(pyPath, install, 60); !res.Success || !strings.HasPrefix(res.Output.Stdout, "0 ") {
			t.Fatalf("pip install: %+v", res)
		}
		if res := d.execute(pyPath, "import a2e_wheel\na2e_wheel.ANSWER", 0); !res.Success || res.Result != "42" {
			t.Errorf("the next cell: %+v", res)
		}
	})

	t.Run("an execution's own variables", func(t *testing.T) {
		code := "import os, subprocess\nprint(subprocess.run(['sh', '-c', 'echo \"$A2E_VAR\"'], capture_output=True, text=True).stdout, end='')\nos.environ.get('A2E_VAR')"
		var res api.ExecuteResponse
		if code := d.do("POST", pyPath+"/execute", api.ExecuteRequest{Code: code, Env: map[string]string{"A2E_VAR": "one run"}}, &res); code != 200 ||
			res.Output.Stdout != "one run\n" || res.Result != "'one run'" {
			t.Errorf("with env: %d %+v", code, res)
		}
		if res := d.execute(pyPath, "'A2E_VAR' in os.environ", 0); res.Result != "False" {
			t.Errorf("the next cell: %+v", res)
		}
		if code := d.do("POST", pyPath+"/execute", `{"code": "1", "env": {"A-B": "x"}}`, nil); code != 400 {
			t.Errorf("a name bash cannot export: %d, want 400", code)
		}
	})

	t.Run("rich outputs", func(t *testing.T) {
		res := d.execute(pyPath, `import matplotlib.pyplot as plt
import pandas as pd
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()
pd.DataFrame({"a": [1, 2]})`, 60)
		if !res.Success || res.Output.Stderr != "" {
			t.Fatalf("%+v %+v", res, res.Error)
		}
		var png, html bool
		for _, r := range res.Results {
			if b, err := base64.StdEncoding.DecodeString(r.PNG); r.PNG != "" && err == nil && strings.HasPrefix(string(b), "\x89PNG") {
				png = true
			}
			html = html || (r.IsMainResult && strings.Contains(r.HTML, "<table"))
		}
		if !png || !html {
			t.Errorf("want a PNG figure and an HTML table, got %d results: %+v", len(res.Results), res.Results)
		}
	})

	t.Run("idle kernel without matplotlib's namespace shim; mplot3d", func(t *testing.T) {
		// matplotlib's nspkg.pth, which the image drops, would import these
		// in every Python process as it starts.
		idle := "/api/v1/contexts/" + d.newContext(sbPath+"/contexts", api.CreateContextRequest{Language: "python"}).ContextID
		held := d.execute(idle, `import sys
sorted(m for m in ("importlib.util", "contextlib", "functools", "collections", "enum") if m in sys.modules)`, 0)
		if held.Result != "[]" {
			t.Errorf("an idle kernel holds %s (%+v)", held.Result, held.Error)
		}
		res := d.execute(idle, `import sys, matplotlib.pyplot as plt
from mpl_toolkits.axes_grid1 import make_axes_locatable
ax = plt.figure().add_subplot(projection="3d")
ax.name, "pkg_resources" in sys.modules`, 60)
		if res.Result != "('3d', False)" {
			t.Errorf("3d axes: %+v %+v", res, res.Error)
		}
	})

	t.Run("1 MB of output", func(t *testing.T) {
		res := d.execute(pyPath, "print('z' * (1 << 20), end='')", 0)
		if len(res.Output.Stdout) != 1<<20 || res.Truncated {
			t.Errorf("stdout %d bytes, truncated %v", len(res.Output.Stdout), res.Truncated)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		events := d.stream(pyPath+"/execute/stream", `{"code": "import sys, time\nprint('one', flush=True)\ntime.sleep(0.3)\nprint('two', file=sys.stderr)\n1/0"}`)
		var names []string // runs of one event are one
		for _, ev := range events {
			if len(names) == 0 || names[len(names)-1] != ev.name {
				names = append(names, ev.name)
			}
		}
		if got := strings.Join(names, ","); got != "stdout,stderr,error,complete" {
			t.Errorf("events %s, want stdout,stderr,error,complete", got)
		}
		first := map[string]time.Duration{}
		for _, ev := range events {
			if _, ok := first[ev.name]; !ok {
				first[ev.name] = ev.at
			}
		}
		if first["stdout"] >= first["stderr"]-200*time.Millisecond {
			t.Errorf("stdout came at %v, stderr at %v: stdout was not streamed before the code went on", first["stdout"], first["stderr"])
		}
	})

	t.Run("kernel killed from outside", func(t *testing.T) {
		pid := d.execute(pyPath, "import os\nkept = 1\nos.getpid()", 0).Result
		if kill := d.exec(sb.ID, "sh", "-c", "kill -KILL "+pid); kill.ExitCode != 0 {
			t.Fatalf("kill %s: %+v", pid, kill)
		}
		// A run that races the death itself (the pipe still open while the
		// kernel's memory is torn down) reports KernelDied instead.
		time.Sleep(300 * time.Millisecond)
		res := d.execute(pyPath, "'kept' in globals()", 0)
		if !res.StateLost || res.Result != "False" {
			t.Errorf("after kill: %+v %+v", res, res.Error)
		}
	})

	t.Run("out of memory", func(t *testing.T) {
		res := d.execute(pyPath, "hog = bytearray(2 << 30)\nhog[::4096] = b'x' * len(hog[::4096])", 60)
		if res.Success || res.Error == nil || res.Error.Name != api.ErrorNameOutOfMemory ||
			res.Error.Kind != api.ErrorKindSystem || !res.StateLost {
			t.Fatalf("memory hog: %+v %+v", res, res.Error)
		}
		if res := d.execute(pyPath, "1 + 1", 0); res.Result != "2" {
			t.Errorf("after OOM: %+v", res)
		}
	})

	t.Run("javascript and bash", func(t *testing.T) {
		node := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "javascript"})
		sh := d.newContext(sbPath+"/contexts", api.CreateContextRequest{Language: "bash", WorkingDir: "/tmp"})
		for _, st := range []struct{ path, code, out, result string }{
			{"/api/v1/contexts/" + node.ContextID, "let n = 20", "", ""},
			{"/api/v1/contexts/" + node.ContextID, "console.log(n + 1); n * 2", "21\n", "40"},
			{"/api/v1/contexts/" + sh.ContextID, "N=5; pwd", "/tmp\n", ""},
			{"/api/v1/contexts/" + sh.ContextID, "echo $((N * 2))", "10\n", ""},
		} {
			res := d.execute(st.path, st.code, 0)
			if !res.Success || res.Output.Stdout != st.out || res.Result != st.result {
				t.Errorf("%q: %+v", st.code, res)
			}
		}
		res := d.execute("/api/v1/contexts/"+node.ContextID, "while (true) {}", 0.5)
		if res.Error == nil || res.Error.Name != api.ErrorNameTimeout || res.StateLost {
			t.Errorf("node busy loop: %+v", res)
		}
		if res := d.execute("/api/v1/contexts/"+node.ContextID, "n", 0); res.Result != "20" {
			t.Errorf("node after interrupt: %+v", res)
		}
	})

	t.Run("two contexts are isolated, a session shares its sandbox", func(t *testing.T) {
		a := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "python", SessionName: "s"})
		b := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "python", SessionName: "s"})
		c := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "python"})
		if a.SandboxID != b.SandboxID || a.SandboxID == c.SandboxID {
			t.Errorf("sandboxes: session %s %s, other %s", a.SandboxID, b.SandboxID, c.SandboxID)
		}
		d.execute("/api/v1/contexts/"+a.ContextID, "v = 'a'\nopen('/workspace/shared', 'w').write('file')", 0)
		res := d.execute("/api/v1/contexts/"+b.ContextID, "print(open('/workspace/shared').read())\n'v' in globals()", 0)
		if res.Output.Stdout != "file\n" || res.Result != "False" {
			t.Errorf("second context of the session: %+v", res)
		}
		for _, id := range []string{a.ContextID, b.ContextID, c.ContextID} {
			d.do("DELETE", "/api/v1/contexts/"+id, nil, nil)
		}
	})

	t.Run("no interpreter", func(t *testing.T) {
		var e api.Error
		code := d.do("POST", sbPath+"/contexts", `{"language":"javascript"}`, &e)
		if code != http.StatusBadRequest || e.Code != api.CodeLanguageMissing {
			t.Errorf("javascript in the python image: %d %+v", code, e)
		}
	})

	d.deleteAll()
	var list api.ContextList
	if d.do("GET", "/api/v1/contexts", nil, &list); len(list.Items) != 0 {
		t.Errorf("contexts outlived their sandboxes: %+v", list.Items)
	}
	d.assertNoLeaks()
}

type sseEvent struct {
	name, data string
	at         time.Duration
}

// stream posts body to path and reads the Server-Sent Events of the answer.
func (d *daemon) stream(path, body string) []sseEvent {
	d.t.Helper()
	start := time.Now()
	resp, err := http.Post(d.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("stream %s: status %d", path, resp.StatusCode)
	}
	var out []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "" && ev.name != "":
			ev.at = time.Since(start)
			out = append(out, ev)
			ev = sseEvent{}
		}
	}
	return out
}

// TestContextsConcurrent runs 100 contexts at once in five sandboxes;
// every result must be its own.
func TestContextsConcurrent(t *testing.T) {
	d := startDaemon(t, "")
	var sbs []api.Sandbox
	for range 5 {
		sbs = append(sbs, d.create(api.CreateSandboxRequest{Image: "agent2env/python", Memory: "2Gi", CPU: "2"}))
	}
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c api.Context
			path := "/api/v1/sandboxes/" + sbs[i%len(sbs)].ID + "/contexts"
			if status := d.do("POST", path, api.CreateContextRequest{Language: "python"}, &c); status != http.StatusCreated {
				t.Errorf("context %d: create status %d", i, status)
				return
			}
			cp := "/api/v1/contexts/" + c.ContextID
			var res api.ExecuteResponse
			d.do("POST", cp+"/execute", api.ExecuteRequest{Code: fmt.Sprintf("me = %d", i)}, &res)
			for j := range 3 {
				res = api.ExecuteResponse{}
				d.do("POST", cp+"/execute", api.ExecuteRequest{Code: fmt.Sprintf("print(me, %d)\nme * 1000 + %d", j, j)}, &res)
				if want := fmt.Sprintf("%d %d\n", i, j); res.Output.Stdout != want || res.Result != strconv.Itoa(i*1000+j) {
					t.Errorf("context %d run %d: stdout %q result %q, want %q", i, j, res.Output.Stdout, res.Result, want)
				}
			}
		}()
	}
	wg.Wait()
	var list api.ContextList
	if d.do("GET", "/api/v1/contexts", nil, &list); len(list.Items) != n {
		t.Errorf("%d contexts listed, want %d", len(list.Items), n)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// waitPoolReady waits until warm pool name has want sandboxes ready, as
// /metrics says, and returns the metrics.
func (d *daemon) waitPoolReady(name string, want int) string {
	d.t.Helper()
	ready := regexp.MustCompile(`agent2env_pool_ready\{pool="` + regexp.QuoteMeta(name) + `"\} (\d+)`)
	deadline := time.Now().Add(15 * time.Minute) // the first fill may build the image
	for {
		resp, err := http.Get(d.url("/metrics"))
		if err != nil {
			d.t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := ready.FindSubmatch(b); m != nil && string(m[1]) == strconv.Itoa(want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("pool %s never had %d ready:\n%s", name, want, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWarmPoolTemplateVersions: a warm pool of a template follows its
// versions (audit F4). Made before the template, it fills once the
// template is made; after an update a create gets the new version, from
// the refilled pool; after a delete a create is 404 TEMPLATE_NOT_FOUND at
// once and the pool's sandboxes are deleted.
func TestWarmPoolTemplateVersions(t *testing.T) {
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Args = append(c.Args, "--warm-pools", "tpl=1") })
	spec := func(ver string) api.TemplateSpec {
		return api.TemplateSpec{Image: "agent2env/python", Env: map[string]string{"VER": ver}, TTL: 600}
	}
	if code := d.do("POST", "/api/v1/templates", api.CreateTemplateRequest{Name: "tpl", Spec: spec("one")}, nil); code != http.StatusCreated {
		t.Fatalf("create template: %d", code)
	}
	d.waitPoolReady("tpl", 1)
	if code := d.do("PUT", "/api/v1/templates/tpl", api.UpdateTemplateRequest{Spec: spec("two"), Changelog: "v2"}, nil); code != http.StatusOK {
		t.Fatalf("update template: %d", code)
	}
	d.waitPoolReady("tpl", 1) // refilled with version 2
	var sb api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{Template: "tpl"}, &sb); code != http.StatusCreated {
		t.Fatalf("create from the template: %d %+v", code, sb)
	}
	if res := d.exec(sb.ID, "sh", "-c", "echo $VER"); sb.TemplateVersion != 2 || sb.Env["VER"] != "two" || res.Stdout != "two\n" {
		t.Errorf("after the update: version %d, env %v, $VER %q; want version 2, two", sb.TemplateVersion, sb.Env, res.Stdout)
	}
	if metrics := d.waitPoolReady("tpl", 1); !strings.Contains(metrics, `agent2env_pool_hits_total{pool="tpl"} 1`) {
		t.Errorf("the create was not served by the pool:\n%s", metrics)
	}

	if code := d.do("DELETE", "/api/v1/templates/tpl", nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete template: %d", code)
	}
	var e api.Error
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{Template: "tpl"}, &e); code != http.StatusNotFound || e.Code != api.CodeTemplateNotFound {
		t.Errorf("create from the deleted template: %d %+v, want 404 %s", code, e, api.CodeTemplateNotFound)
	}
	d.waitPoolReady("tpl", 0)
	d.deleteAll()
	d.stop() // waits for the retired sandboxes' deletion
	d.assertNoLeaks()
}

// TestWarmPool: a pool is filled, visible in /metrics, hidden from the
// sandbox list, serves context and sandbox creates, refills, and is emptied
// when the daemon stops.
func TestWarmPool(t *testing.T) {
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Args = append(c.Args, "--warm-pools", "python=2") })
	waitReady := func(want int) string { t.Helper(); return d.waitPoolReady("python", want) }
	metrics := waitReady(2)
	if !strings.Contains(metrics, `agent2env_pool_target{pool="python"} 2`) {
		t.Errorf("metrics lack the target:\n%s", metrics)
	}
	var sbs api.List[api.Sandbox]
	if d.do("GET", "/api/v1/sandboxes", nil, &sbs); len(sbs.Items) != 0 {
		t.Errorf("pooled sandboxes are listed: %+v", sbs.Items)
	}

	start := time.Now()
	c := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "python"})
	took := time.Since(start)
	res := d.execute("/api/v1/contexts/"+c.ContextID, "print(6 * 7)", 0)
	if res.Output.Stdout != "42\n" {
		t.Errorf("pooled context: %+v", res)
	}
	t.Logf("context from the warm pool in %v", took)
	// The python pool's image is contexts' default; a TTL of the request's
	// own is set as the sandbox is taken (the E2B and OpenSandbox SDKs
	// always send one).
	var sb api.Sandbox
	ttl := 120
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{Image: "agent2env/code-interpreter", TTL: &ttl}, &sb); code != http.StatusCreated || sb.Status != api.StatusRunning {
		t.Fatalf("sandbox from the pool: %d %+v", code, sb)
	}
	if left := time.Until(sb.ExpiresAt); sb.TTL != ttl || left < 100*time.Second || left > 121*time.Second {
		t.Errorf("sandbox from the pool: ttl %d, expires in %v; want %d s from now", sb.TTL, left, ttl)
	}
	metrics = waitReady(2) // refilled
	if !strings.Contains(metrics, `agent2env_pool_hits_total{pool="python"} 2`) {
		t.Errorf("metrics do not count two hits:\n%s", metrics)
	}
	if d.do("GET", "/api/v1/sandboxes", nil, &sbs); len(sbs.Items) != 2 {
		t.Errorf("want the two claimed sandboxes listed, got %d", len(sbs.Items))
	}
	d.do("DELETE", "/api/v1/contexts/"+c.ContextID, nil, nil)
	d.deleteAll()
	d.stop() // empties the pool
	d.assertNoLeaks()
}
