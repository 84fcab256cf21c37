// Package e2e tests the agent2env binary end to end: a real daemon in a
// subprocess, real images and runc, driven over HTTP exactly as a client
// would. The tests need root and an OCI runtime; they run in CI.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/testenv"
)

// binary is the agent2env binary under test: $AGENT2ENV_BIN, or one built
// by TestMain.
var binary string

// imageDir is the image store every daemon of the run shares, so that each
// image is unpacked once per run (built images come from the cache).
var imageDir string

// crunPath and criuPath are the crun and CRIU this checkout's scripts
// build (scripts/crun.sh --path, scripts/criu.sh --path), "" where not
// built. Every daemon of the run is given them (toolFlags): serve's auto
// would take the newest that any checkout cached on the machine, so a run
// could test another commit's crun.
var crunPath, criuPath string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	if imageDir, err = os.MkdirTemp("", "a2e-e2e-images-"); err != nil {
		panic(err)
	}
	defer os.RemoveAll(imageDir)
	binary = os.Getenv("AGENT2ENV_BIN")
	if binary == "" && os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "a2e-e2e-bin-")
		if err != nil {
			panic(err)
		}
		binary = filepath.Join(dir, "agent2env")
		cmd := exec.Command("go", "build", "-o", binary, "../../cmd/agent2env")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			panic(fmt.Sprintf("build agent2env: %v\n%s", err, out))
		}
		defer os.RemoveAll(dir)
	}
	crunPath, criuPath = cachedTool("crun"), cachedTool("criu")
	return m.Run()
}

// toolFlags are serve's flags for crunPath and criuPath.
func toolFlags() []string {
	var flags []string
	if crunPath != "" {
		flags = append(flags, "--runtime", crunPath)
	}
	if criuPath != "" {
		flags = append(flags, "--criu", criuPath)
	}
	return flags
}

// cachedTool returns the path of the program scripts/<name>.sh builds
// for this checkout, or "" if it is not built.
func cachedTool(name string) string {
	out, err := exec.Command("../../scripts/"+name+".sh", "--path").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// daemon is a running `agent2env serve` subprocess.
type daemon struct {
	t       *testing.T
	dataDir string
	addr    string
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{}
	// key is the API key do sends, for a daemon started with keys; "":
	// none.
	key string
}

// syncBuffer is the daemon's log: written by the process's output copier
// while tests read it.
type syncBuffer struct{ testenv.Buffer }

// startDaemon starts a daemon on dataDir (a fresh one when empty); each
// option may change its command (environment, flags) before it starts.
func startDaemon(t *testing.T, dataDir string, options ...func(*exec.Cmd)) *daemon {
	t.Helper()
	runtimetest.RequiresRoot(t)
	if dataDir == "" {
		var err error
		if dataDir, err = os.MkdirTemp("", "a2e-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			purge(t, dataDir)
			os.RemoveAll(dataDir)
		})
	}
	// The daemon picks its port (--listen :0) and says which it took: a
	// port found free beforehand may be taken by then, by a sandbox's
	// forward or another test's daemon, whose /readyz would answer ours.
	d := &daemon{t: t, dataDir: dataDir, log: new(syncBuffer), exited: make(chan struct{})}
	d.cmd = exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--image-dir", imageDir, "--log-level", "debug"}, toolFlags()...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	for _, o := range options {
		o(d.cmd)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if d.addr == "" {
			d.addr = d.log.logged("serving", "addr")
		}
		if d.addr != "" {
			resp, err := http.Get(d.url("/readyz"))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return d
				}
			}
		}
		select {
		case <-d.exited:
			t.Fatalf("daemon exited at start:\n%s", d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not ready after 30s:\n%s", d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// purge deletes whatever sandboxes a test left in dataDir (a failed test
// may leave them running behind a killed daemon), so that a failure never
// leaks into the machine: without its records, a daemon's recovery deletes
// every sandbox it finds as an orphan.
func purge(t *testing.T, dataDir string) {
	ents, _ := os.ReadDir(filepath.Join(dataDir, "oci"))
	left := false
	for _, e := range ents {
		left = left || !strings.HasPrefix(e.Name(), "_")
	}
	if !left {
		return
	}
	t.Logf("purging sandboxes left in %s", dataDir)
	dbs, _ := filepath.Glob(filepath.Join(dataDir, "state.db*"))
	for _, db := range dbs {
		os.Remove(db)
	}
	// It only cleans up: no background build of the built-in images.
	cmd := exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--image-dir", imageDir, "--prebuild-images=false"}, toolFlags()...)...)
	log := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Errorf("purge: %v", err)
		return
	}
	for i := 0; i < 600; i++ {
		if addr := log.logged("serving", "addr"); addr != "" {
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	ents, _ = os.ReadDir(filepath.Join(dataDir, "oci"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "_") {
			t.Errorf("purge: sandbox %s still left after recovery:\n%s", e.Name(), log.String())
		}
	}
}

// logged returns the value of attribute key in the first line the daemon
// logged with message msg (slog's text form), or "" if none yet.
func (s *syncBuffer) logged(msg, key string) string {
	for _, line := range strings.Split(s.String(), "\n") {
		fields := strings.Fields(line)
		if !slices.Contains(fields, "msg="+msg) {
			continue
		}
		for _, f := range fields {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				return v
			}
		}
	}
	return ""
}

// waitLogged waits up to 10 s for the daemon to log a line with message
// msg, and returns its attribute key (syncBuffer.logged).
func (d *daemon) waitLogged(msg, key string) string {
	d.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if v := d.log.logged(msg, key); v != "" {
			return v
		}
	}
	d.t.Fatalf("the daemon logged no %q with %s in 10s", msg, key)
	return ""
}

func (d *daemon) url(path string) string { return "http://" + d.addr + path }

// stop ends the daemon gracefully.
func (d *daemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.t.Errorf("daemon did not stop within 30s of SIGTERM")
		d.cmd.Process.Kill()
		<-d.exited
	}
}

// kill ends the daemon with SIGKILL, as a crash would.
func (d *daemon) kill() {
	d.cmd.Process.Kill()
	<-d.exited
}

// do sends a request and decodes a JSON answer into out (when not nil),
// returning the status code.
func (d *daemon) do(method, path string, body any, out any) int {
	d.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			d.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, d.url(path), r)
	if err != nil {
		d.t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.key != "" {
		req.Header.Set("Authorization", "Bearer "+d.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			d.t.Fatalf("%s %s: %d %q is not the expected JSON: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// create makes a sandbox from image and waits until it runs.
func (d *daemon) create(req api.CreateSandboxRequest) api.Sandbox {
	d.t.Helper()
	var sb api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", req, &sb); code != http.StatusCreated {
		d.t.Fatalf("create sandbox: status %d", code)
	}
	return d.waitRunning(sb.ID)
}

func (d *daemon) waitRunning(id string) api.Sandbox {
	d.t.Helper()
	// The first sandbox of an image may wait for the image to be built.
	deadline := time.Now().Add(15 * time.Minute)
	for {
		var sb api.Sandbox
		if code := d.do("GET", "/api/v1/sandboxes/"+id, nil, &sb); code != http.StatusOK {
			d.t.Fatalf("get sandbox %s: status %d", id, code)
		}
		switch sb.Status {
		case api.StatusRunning:
			return sb
		case api.StatusPending:
		default:
			d.t.Fatalf("sandbox %s is %s: %s", id, sb.Status, sb.Reason)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("sandbox %s still pending after 15 minutes", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *daemon) exec(id string, cmd ...string) api.ExecResponse {
	d.t.Helper()
	var res api.ExecResponse
	if code := d.do("POST", "/api/v1/sandboxes/"+id+"/exec", api.ExecRequest{Command: cmd, Timeout: 60}, &res); code != http.StatusOK {
		d.t.Fatalf("exec %v: status %d", cmd, code)
	}
	return res
}

func (d *daemon) upload(id, path string, data []byte) (int, []byte) {
	d.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("path", path)
	fw, _ := mw.CreateFormFile("file", filepath.Base(path))
	fw.Write(data)
	mw.Close()
	resp, err := http.Post(d.url("/api/v1/sandboxes/"+id+"/files"), mw.FormDataContentType(), &body)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func (d *daemon) download(id, path string) (int, []byte) {
	d.t.Helper()
	resp, err := http.Get(d.url("/api/v1/sandboxes/" + id + "/files?path=" + path))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func (d *daemon) deleteAll() {
	d.t.Helper()
	var list api.List[api.Sandbox]
	d.do("GET", "/api/v1/sandboxes", nil, &list)
	for _, sb := range list.Items {
		if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
			d.t.Errorf("delete %s: status %d", sb.ID, code)
		}
	}
}

// assertNoLeaks checks that nothing of the daemon's sandboxes is left.
func (d *daemon) assertNoLeaks() {
	d.t.Helper()
	runtimetest.AssertNoLeaks(d.t, filepath.Join(d.dataDir, "oci"))
}
