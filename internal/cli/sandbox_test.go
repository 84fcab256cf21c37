package cli

import (
	"bytes"
	"crypto/rand"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

// run runs the CLI and returns its exit code and output.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runIn runs the CLI as Main does, with stdin as its standard input.
func runIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd, err := execute(t.Context(), env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut}, args)
	code = report(&errOut, cmd, err)
	return code, out.String(), errOut.String()
}

// result is what one CLI run produced.
type result struct {
	Code   int
	Stdout string
	Stderr string // a substring the output must contain
}

// check runs args and compares the exit code and stdout exactly and
// stderr by substring.
func check(t *testing.T, args []string, want result) {
	t.Helper()
	code, stdout, stderr := run(t, args...)
	got := result{Code: code, Stdout: stdout, Stderr: want.Stderr}
	if !strings.Contains(stderr, want.Stderr) {
		got.Stderr = stderr
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent2env %s (-want +got):\n%s", strings.Join(args, " "), diff)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"sandbox"}, "usage: agent2env sandbox <command>"},
		{[]string{"sandbox", "bogus"}, `unknown command "bogus"`},
		{[]string{"sandbox", "create", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"sandbox", "create", "extra"}, `unexpected argument "extra"`},
		{[]string{"sandbox", "create", "--env", "NOEQUALS"}, `"NOEQUALS" is not KEY=VALUE`},
		{[]string{"sandbox", "create", "--ttl", "soon"}, `invalid argument "soon" for "--ttl" flag`},
		{[]string{"sandbox", "ls", "x"}, `unexpected argument "x"`},
		{[]string{"sandbox", "exec", "sb1"}, "need a sandbox id and a command"},
		{[]string{"sandbox", "exec", "sb1", "--"}, "need a sandbox id and a command"},
		{[]string{"sandbox", "exec", "sb1", "--timeout", "x", "--", "ls"}, `invalid argument "x" for "--timeout" flag`},
		{[]string{"sandbox", "cp", "sb1:/a"}, "need SRC and DST"},
		{[]string{"sandbox", "cp", "a", "b"}, "exactly one of SRC and DST must be ID:/path"},
		{[]string{"sandbox", "cp", "sb1:/a", "sb2:/b"}, "exactly one of SRC and DST must be ID:/path"},
		{[]string{"sandbox", "cp", "a", "sb1:"}, "sb1: names no path in the sandbox: write ID:/path"},
		{[]string{"sandbox", "cp", "sb1:", "a"}, "sb1: names no path in the sandbox: write ID:/path"},
		{[]string{"sandbox", "logs"}, "need one sandbox id"},
		{[]string{"sandbox", "rm"}, "need at least one sandbox id"},
		{[]string{"image"}, "usage: agent2env image <command>"},
		{[]string{"image", "pull"}, "need one REF"},
		{[]string{"image", "build", "a", "b"}, `unexpected argument "b"`},
		{[]string{"image", "build"}, "need one NAME"},
		{[]string{"image", "import"}, "need one FILE"},
		{[]string{"image", "rm"}, "need at least one image reference"},
		{[]string{"image", "ls", "--json=maybe"}, `invalid argument "maybe" for "--json" flag`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newFakeDaemon(t)
			checkUsageError(t, &d.recorder, tt.args, tt.stderr)
		})
	}
}

func TestSandboxCommands(t *testing.T) {
	longAgo := time.Now().Add(-150 * time.Minute).UTC()
	seed := []api.Sandbox{
		{ID: "sb7", Image: "alpine", CPU: "1", Memory: "512Mi", Status: api.StatusRunning, CreatedAt: longAgo},
		{ID: "sb8", Image: "broken", CPU: "500m", Memory: "1Gi", Status: api.StatusFailed, Reason: "no such image", CreatedAt: longAgo},
	}
	tests := []struct {
		name string
		args []string
		want result
	}{
		{
			name: "create prints the id alone",
			args: []string{"sandbox", "create", "--image", "ready"},
			want: result{Stdout: "sb1\n"},
		},
		{
			name: "create waits for a pending sandbox",
			args: []string{"sandbox", "create", "--image", "alpine", "--cpu", "2", "--json"},
			want: result{Stdout: `{
  "id": "sb1",
  "image": "alpine",
  "cpu": "2",
  "memory": "",
  "ttl": 0,
  "status": "running",
  "created_at": "<time>",
  "updated_at": "<time>",
  "expires_at": "<time>",
  "state": "running"
}
`},
		},
		{
			// ID=$(agent2env sandbox create ...) gets no id of a sandbox
			// that does not run.
			name: "create fails with the reason, no id on stdout",
			args: []string{"sandbox", "create", "--image", "broken"},
			want: result{Code: 1, Stderr: "agent2env sandbox: sandbox sb1 failed: prepare image broken: manifest unknown\n" +
				"  remove it with: agent2env sandbox rm sb1\n"},
		},
		{
			name: "create fails, -q prints nothing either",
			args: []string{"sandbox", "create", "--image", "broken", "-q"},
			want: result{Code: 1, Stderr: "sandbox sb1 failed"},
		},
		{
			name: "create without waiting",
			args: []string{"sandbox", "create", "--image", "broken", "--wait=false", "--json"},
			want: result{Stdout: `{
  "id": "sb1",
  "image": "broken",
  "cpu": "",
  "memory": "",
  "ttl": 0,
  "status": "pending",
  "created_at": "<time>",
  "updated_at": "<time>",
  "expires_at": "<time>",
  "state": "pending"
}
`},
		},
		{
			name: "create rejected",
			args: []string{"sandbox", "create"},
			want: result{Code: 1, Stderr: "agent2env sandbox: create sandbox: image is required (INVALID_REQUEST, HTTP 400)\n"},
		},
		{
			name: "ls",
			args: []string{"sandbox", "ls"},
			want: result{Stdout: "" +
				"ID    IMAGE    STATUS    CPU    MEMORY   AGE   REASON\n" +
				"sb7   alpine   running   1      512Mi    2h    \n" +
				"sb8   broken   failed    500m   1Gi      2h    no such image\n"},
		},
		{
			name: "ls json",
			args: []string{"sandbox", "ls", "--json"},
			want: result{Stdout: `{
  "items": [
    {
      "id": "sb7",
      "image": "alpine",
      "cpu": "1",
      "memory": "512Mi",
      "ttl": 0,
      "status": "running",
      "created_at": "<time>",
      "updated_at": "<time>",
      "expires_at": "<time>",
      "state": "running"
    },
    {
      "id": "sb8",
      "image": "broken",
      "cpu": "500m",
      "memory": "1Gi",
      "ttl": 0,
      "status": "failed",
      "created_at": "<time>",
      "updated_at": "<time>",
      "expires_at": "<time>",
      "reason": "no such image",
      "state": "failed"
    }
  ]
}
`},
		},
		{
			name: "get",
			args: []string{"sandbox", "get", "sb8"},
			want: result{Stdout: "" +
				"ID    IMAGE    STATUS   CPU    MEMORY   AGE   REASON\n" +
				"sb8   broken   failed   500m   1Gi      2h    no such image\n"},
		},
		{
			name: "inspect json",
			args: []string{"sandbox", "inspect", "sb7", "-o", "json"},
			want: result{Stdout: `{
  "id": "sb7",
  "image": "alpine",
  "cpu": "1",
  "memory": "512Mi",
  "ttl": 0,
  "status": "running",
  "created_at": "<time>",
  "updated_at": "<time>",
  "expires_at": "<time>",
  "state": "running"
}
`},
		},
		{
			name: "get of a missing sandbox",
			args: []string{"sandbox", "get", "nope"},
			want: result{Code: 1, Stderr: "sandbox nope not found (SANDBOX_NOT_FOUND, HTTP 404)"},
		},
		{
			name: "logs",
			args: []string{"sandbox", "logs", "sb7"},
			want: result{Stdout: "2025-01-02T03:04:05.000Z pending: created from image alpine\n" +
				"2025-01-02T03:04:06.000Z running: agent ready\n\nagent listening\n"},
		},
		{
			name: "logs json",
			args: []string{"sandbox", "logs", "--json", "sb7"},
			want: result{Stdout: `{
  "logs": "agent listening",
  "events": [
    "2025-01-02T03:04:05.000Z pending: created from image alpine",
    "2025-01-02T03:04:06.000Z running: agent ready"
  ]
}
`},
		},
		{
			name: "logs of a history the daemon cut",
			args: []string{"sandbox", "logs", "sb8"},
			want: result{Stdout: "(998 older events dropped)\n" +
				"2025-01-02T03:04:05.000Z pending: created from image alpine\n" +
				"2025-01-02T03:04:06.000Z running: agent ready\n\nagent listening\n"},
		},
		{
			name: "logs of a missing sandbox",
			args: []string{"sandbox", "logs", "nope"},
			want: result{Code: 1, Stderr: "sandbox nope not found (SANDBOX_NOT_FOUND, HTTP 404)"},
		},
		{
			name: "rm removes what it can",
			args: []string{"sandbox", "rm", "sb7", "nope", "sb8"},
			want: result{Code: 1, Stdout: "sb7\nsb8\n", Stderr: "delete sandbox nope: sandbox nope not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeDaemon(t)
			for _, sb := range seed {
				d.addSandbox(sb)
			}
			code, stdout, stderr := run(t, tt.args...)
			got := result{Code: code, Stdout: stripTimes(stdout), Stderr: tt.want.Stderr}
			if !strings.Contains(stderr, tt.want.Stderr) {
				got.Stderr = stderr
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// stripTimes replaces the JSON created_at and expires_at values, which the
// fake daemon takes from the clock.
func stripTimes(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, key := range []string{"created_at", "updated_at", "expires_at"} {
			if k, _, ok := strings.Cut(l, `"`+key+`": "`); ok {
				end := ""
				if strings.HasSuffix(l, ",") {
					end = ","
				}
				lines[i] = k + `"` + key + `": "<time>"` + end
			}
		}
	}
	return strings.Join(lines, "\n")
}

func TestCreateRequest(t *testing.T) {
	d := newFakeDaemon(t)
	check(t, []string{"sandbox", "create", "--image", "ready", "--cpu", "2", "--memory", "1Gi", "--ttl", "0",
		"--env", "A=1", "--env", "B=x=y"}, result{Stdout: "sb1\n"})
	check(t, []string{"sandbox", "create", "--image", "ready"}, result{Stdout: "sb2\n"})
	zero := 0
	want := []api.CreateSandboxRequest{
		{Image: "ready", CPU: "2", Memory: "1Gi", TTL: &zero, Env: map[string]string{"A": "1", "B": "x=y"}},
		{Image: "ready"}, // no env: an empty map is not sent
	}
	if diff := cmp.Diff(want, d.creates); diff != "" {
		t.Errorf("create requests (-want +got):\n%s", diff)
	}
}

func TestExec(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want result
		req  api.ExecRequest
	}{
		{
			name: "output and success",
			args: []string{"sandbox", "exec", "sb7", "--", "echo", "hello", "world"},
			want: result{Stdout: "hello world\n"},
			req:  api.ExecRequest{Command: []string{"echo", "hello", "world"}},
		},
		{
			name: "flags after the id",
			args: []string{"sandbox", "exec", "sb7", "--timeout", "5", "--env", "K=V", "--cwd", "/tmp", "--", "echo", "-n"},
			want: result{Stdout: "-n\n"},
			req:  api.ExecRequest{Command: []string{"echo", "-n"}, Timeout: 5, Env: map[string]string{"K": "V"}, Cwd: "/tmp"},
		},
		{
			name: "flags before the id, no --",
			args: []string{"sandbox", "exec", "--cwd", "/", "sb7", "echo", "-x", "--y"},
			want: result{Stdout: "-x --y\n"},
			req:  api.ExecRequest{Command: []string{"echo", "-x", "--y"}, Cwd: "/"},
		},
		{
			name: "exit code",
			args: []string{"sandbox", "exec", "sb7", "--", "fail", "3"},
			want: result{Code: 3, Stderr: "failing\n"},
			req:  api.ExecRequest{Command: []string{"fail", "3"}},
		},
		{
			name: "exit code out of range",
			args: []string{"sandbox", "exec", "sb7", "--", "fail", "300"},
			want: result{Code: 1, Stderr: "failing\n"},
			req:  api.ExecRequest{Command: []string{"fail", "300"}},
		},
		{
			name: "timeout",
			args: []string{"sandbox", "exec", "sb7", "--", "timeout"},
			want: result{Code: 124, Stderr: "agent2env sandbox exec: the command timed out and was killed\n"},
			req:  api.ExecRequest{Command: []string{"timeout"}},
		},
		{
			name: "binary output, byte for byte",
			args: []string{"sandbox", "exec", "sb7", "--", "bytes"},
			want: result{Stdout: binaryOutput[:100], Stderr: binaryOutput[100:]},
			req:  api.ExecRequest{Command: []string{"bytes"}},
		},
		{
			name: "missing sandbox",
			args: []string{"sandbox", "exec", "nope", "--", "echo"},
			want: result{Code: 1, Stderr: "agent2env sandbox: exec in sandbox nope: sandbox nope not found (SANDBOX_NOT_FOUND, HTTP 404)\n"},
			req:  api.ExecRequest{Command: []string{"echo"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeDaemon(t)
			d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
			check(t, tt.args, tt.want)
			tt.req.OutputEncoding = api.OutputBase64 // the output as it came, bytes that are not UTF-8 too
			if diff := cmp.Diff([]api.ExecRequest{tt.req}, d.execs); diff != "" {
				t.Errorf("exec request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCopy(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	dir := t.TempDir()
	data := make([]byte, 1<<20+17)
	rand.Read(data)
	src := filepath.Join(dir, "tool.bin")
	if err := os.WriteFile(src, data, 0o750); err != nil {
		t.Fatal(err)
	}
	// Upload, by name and into a directory, then download both ways.
	check(t, []string{"sandbox", "cp", src, "sb7:/workspace/tool"}, result{})
	check(t, []string{"sandbox", "cp", src, "sb7:/workspace/bin/"}, result{})
	for _, p := range []string{"sb7:/workspace/tool", "sb7:/workspace/bin/tool.bin"} {
		f := d.files[p]
		if !bytes.Equal(f.data, data) || f.mode != "0750" {
			t.Errorf("%s: %d bytes mode %s, want the %d bytes of %s mode 0750", p, len(f.data), f.mode, len(data), src)
		}
	}
	back := filepath.Join(dir, "back")
	check(t, []string{"sandbox", "cp", "sb7:/workspace/tool", back}, result{})
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
		t.Errorf("downloaded file differs from the upload (err %v)", err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	check(t, []string{"sandbox", "cp", "sb7:/workspace/bin/tool.bin", sub}, result{})
	if got, err := os.ReadFile(filepath.Join(sub, "tool.bin")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("file downloaded into a directory differs from the upload (err %v)", err)
	}
	code, stdout, _ := run(t, "sandbox", "cp", "sb7:/workspace/tool", "-")
	if code != 0 || stdout != string(data) {
		t.Errorf("download to stdout: exit %d, %d bytes, want the %d uploaded", code, len(stdout), len(data))
	}

	// A missing file creates no local file.
	missing := filepath.Join(dir, "missing")
	check(t, []string{"sandbox", "cp", "sb7:/nope", missing}, result{Code: 1, Stderr: "no such file /nope (FILE_NOT_FOUND, HTTP 404)"})
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a failed download left %s behind", missing)
	}
	// A local directory that is not there is refused as cp(1) refuses it,
	// and none is made.
	for _, dst := range []string{filepath.Join(dir, "nodir") + "/", filepath.Join(dir, "nodir", "f")} {
		check(t, []string{"sandbox", "cp", "sb7:/workspace/tool", dst}, result{Code: 1, Stderr: dst + ": no such file or directory\n"})
	}
	if _, err := os.Stat(filepath.Join(dir, "nodir")); !os.IsNotExist(err) {
		t.Errorf("a failed download made the directory: %v", err)
	}
	// A destination naming a directory of the sandbox is copied into, as
	// by cp(1), a trailing / or not.
	other := filepath.Join(dir, "other.txt")
	os.WriteFile(other, []byte("other\n"), 0o644)
	check(t, []string{"sandbox", "cp", other, "sb7:/workspace/bin"}, result{})
	if f := d.files["sb7:/workspace/bin/other.txt"]; string(f.data) != "other\n" {
		t.Errorf("copied into the directory /workspace/bin: %q, want %q (files: %v)", f.data, "other\n", slices.Sorted(maps.Keys(d.files)))
	}
	check(t, []string{"sandbox", "cp", other, "sb7:/workspace/tool"}, result{})
	if f := d.files["sb7:/workspace/tool"]; string(f.data) != "other\n" {
		t.Errorf("copied over the file /workspace/tool: %q, want %q", f.data, "other\n")
	}
	check(t, []string{"sandbox", "cp", dir, "sb7:/x"}, result{Code: 1, Stderr: "is a directory"})
	check(t, []string{"sandbox", "cp", filepath.Join(dir, "absent"), "sb7:/x"}, result{Code: 1, Stderr: "no such file or directory"})
}

// TestCopyReplace checks that a download replaces a local file whole or
// not at all: one cut short leaves the file that was there as it was, and
// one that completes keeps its permissions and writes through a link.
func TestCopyReplace(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	d.files["sb7:/new"] = fakeFile{data: []byte("new\n")}
	d.files["sb7:/cut"] = fakeFile{data: []byte("partial"), cut: true}
	dir := t.TempDir()
	tests := []struct {
		name, src string
		link      bool // dst is a link to the file
		wantCode  int
		want      string
	}{
		{name: "completed", src: "sb7:/new", wantCode: 0, want: "new\n"},
		{name: "through a link", src: "sb7:/new", link: true, wantCode: 0, want: "new\n"},
		{name: "cut short", src: "sb7:/cut", wantCode: 1, want: "old\n"},
		{name: "cut short through a link", src: "sb7:/cut", link: true, wantCode: 1, want: "old\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := filepath.Join(dir, strconv.Itoa(i))
			os.Mkdir(sub, 0o755)
			file := filepath.Join(sub, "out.txt")
			if err := os.WriteFile(file, []byte("old\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			dst := file
			if tt.link {
				dst = filepath.Join(sub, "link")
				if err := os.Symlink("out.txt", dst); err != nil {
					t.Fatal(err)
				}
			}
			code, _, stderr := run(t, "sandbox", "cp", tt.src, dst)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d: %s", code, tt.wantCode, stderr)
			}
			got, err := os.ReadFile(file)
			if err != nil || string(got) != tt.want {
				t.Errorf("%s holds %q (err %v), want %q", file, got, err, tt.want)
			}
			if fi, err := os.Stat(file); err == nil && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want its own, 0600", file, fi.Mode().Perm())
			}
			if tt.link {
				if fi, err := os.Lstat(dst); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is no longer a link (err %v)", dst, err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(sub, ".*")); len(left) > 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

// TestCopyToPipe checks that a download to what is not a regular file (a
// named pipe here, /dev/null or /dev/stdout alike) writes to it rather
// than replacing it.
func TestCopyToPipe(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	d.files["sb7:/data"] = fakeFile{data: []byte("through the pipe\n")}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	read := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // from when the download opens it to its close
		read <- string(b)
	}()
	if code, _, stderr := run(t, "sandbox", "cp", "sb7:/data", fifo); code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("%s is no longer a named pipe: %v (err %v)", fifo, fi.Mode(), err)
	}
	select {
	case got := <-read:
		if got != "through the pipe\n" {
			t.Errorf("read %q from the pipe, want %q", got, "through the pipe\n")
		}
	case <-time.After(10 * time.Second):
		t.Error("nothing came through the pipe")
	}
}

func TestCopyStdin(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	if code, _, stderr := runIn(t, "from stdin\n", "sandbox", "cp", "-", "sb7:/workspace/in.txt"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f := d.files["sb7:/workspace/in.txt"]; string(f.data) != "from stdin\n" || f.mode != "0644" {
		t.Errorf("uploaded %q mode %s, want %q mode 0644", f.data, f.mode, "from stdin\n")
	}
	for _, dst := range []string{"sb7:/workspace/", "sb7:/workspace"} {
		if code, _, stderr := runIn(t, "from stdin\n", "sandbox", "cp", "-", dst); code != 1 || !strings.Contains(stderr, "name the destination file") {
			t.Errorf("copying stdin to the directory %s: exit %d, stderr %q; want 1 and to name the file", dst, code, stderr)
		}
	}
}

func TestConnectionFlags(t *testing.T) {
	d := newFakeDaemon(t)
	url := os.Getenv(client.EnvURL)
	d.token = "s3cret"
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	check(t, []string{"sandbox", "rm", "sb7"}, result{Code: 1, Stderr: "missing or wrong token (UNAUTHORIZED, HTTP 401)"})
	check(t, []string{"sandbox", "rm", "--token", "wrong", "sb7"}, result{Code: 1, Stderr: "UNAUTHORIZED"})
	t.Setenv(client.EnvToken, "s3cret")
	t.Setenv(client.EnvURL, "http://127.0.0.1:1")
	check(t, []string{"sandbox", "rm", "sb7"}, result{Code: 1, Stderr: "connection refused"})
	check(t, []string{"sandbox", "rm", "--url", url + "/api/v1", "sb7"}, result{Stdout: "sb7\n"})
	check(t, []string{"sandbox", "ls", "--url", "ftp://x"}, result{Code: 1, Stderr: `agent2env url "ftp://x"`})
	// The token is not shown in help.
	if _, _, stderr := run(t, "sandbox", "ls", "-h"); strings.Contains(stderr, "s3cret") {
		t.Errorf("help shows the token:\n%s", stderr)
	}
}

// A paused sandbox, which the API gives as running in status (LiteBoxd's
// clients know no paused) and as paused in state, shows paused.
func TestPausedSandboxShown(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb9", Image: "alpine", CPU: "1", Memory: "512Mi", Status: api.StatusPaused,
		Reason: "paused by request", CreatedAt: time.Now().Add(-time.Minute).UTC()})
	code, stdout, stderr := run(t, "sandbox", "ls")
	want := "" +
		"ID    IMAGE    STATUS   CPU   MEMORY   AGE   REASON\n" +
		"sb9   alpine   paused   1     512Mi    1m    paused by request\n"
	if code != 0 || stdout != want {
		t.Errorf("ls: exit %d, stdout:\n%s\nstderr: %s\nwant:\n%s", code, stdout, stderr, want)
	}
	code, stdout, stderr = run(t, "sandbox", "get", "sb9", "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"status": "running",`) || !strings.Contains(stdout, `"state": "paused"`) {
		t.Errorf("get -o json: exit %d, stdout:\n%s\nstderr: %s\nwant status running and state paused, as the API gives them", code, stdout, stderr)
	}
}
