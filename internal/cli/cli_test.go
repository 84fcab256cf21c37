package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agent2env/agent2env/internal/buildinfo"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// TestMain keeps the tests from what the machine's user has set up: their
// client config file and the compatibility variables.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agent2env-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	for _, k := range append(append([]string{envRunTimeout, envConfig}, urlEnv...), tokenEnv...) {
		os.Unsetenv(k)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		// stdout and stderr must contain these.
		stdout, stderr string
		timeoutVar     string // $SANDBOX_TIMEOUT, if not empty
	}{
		{name: "success", args: []string{"sandbox", "ls", "-q"}, stdout: "sb7\n"},
		{name: "help", args: []string{"sandbox", "create", "--help"}, stdout: "agent2env sandbox create [flags]"},
		{name: "help command", args: []string{"help", "sandbox"}, stdout: "Available Commands:\n  cp "},
		{name: "help of a group", args: []string{"template", "-h"}, stdout: "agent2env template [command]"},
		{name: "single-dash help", args: []string{"import", "-help"}, stdout: "agent2env import FILE [flags]"},
		{name: "the daemon says no", args: []string{"sandbox", "logs", "nope"}, code: 1,
			stderr: "agent2env sandbox: get logs of sandbox nope: sandbox nope not found (SANDBOX_NOT_FOUND, HTTP 404)\n"},
		{name: "no command", args: nil, code: 2, stderr: "agent2env: need a command\nusage: agent2env <command> [flags]\n"},
		{name: "unknown command", args: []string{"sandbx"}, code: 2, stderr: `agent2env: unknown command "sandbx" (did you mean "sandbox"?)`},
		{name: "unknown subcommand", args: []string{"image", "pul"}, code: 2, stderr: `agent2env image: unknown command "pul" (did you mean "pull"?)`},
		{name: "unknown flag", args: []string{"sandbox", "ls", "--jsn"}, code: 2, stderr: "agent2env sandbox ls: unknown flag: --jsn\nusage: agent2env sandbox ls [flags]\n"},
		{name: "bad output format", args: []string{"sandbox", "ls", "-o", "xml"}, code: 2, stderr: `invalid argument "xml" for "-o, --output" flag: want table, wide, json, yaml`},
		{name: "no table here", args: []string{"sandbox", "logs", "sb7", "-o", "wide"}, code: 2, stderr: "want json, yaml"},
		{name: "agent flag", args: []string{"agent", "--uid", "x"}, code: 2, stderr: `agent2env agent: invalid argument "x" for "--uid" flag: want a whole number`},
		{name: "not a number", args: []string{"sandbox", "create", "--ttl", "soon"}, code: 2, stderr: `invalid argument "soon" for "--ttl" flag: want a whole number` + "\n"},
		{name: "number out of range", args: []string{"sandbox", "fork", "sb7", "--count", "99999999999999999999"}, code: 2,
			stderr: `invalid argument "99999999999999999999" for "--count" flag: out of range` + "\n"},
		{name: "not a boolean", args: []string{"sandbox", "create", "--wait=maybe"}, code: 2, stderr: `invalid argument "maybe" for "--wait" flag: want true or false` + "\n"},
		{name: "short flag not a number", args: []string{"llm", "tail", "-n", "x"}, code: 2, stderr: `invalid argument "x" for "-n, --lines" flag: want a whole number` + "\n"},
		{name: "agent argument", args: []string{"agent", "x"}, code: 2, stderr: `agent2env agent: unexpected argument "x"`},
		{name: "bad timeout variable", args: []string{"sandbox", "exec", "sb7", "--", "echo"}, timeoutVar: "soon", code: 1,
			stderr: `SANDBOX_TIMEOUT="soon": want seconds or a duration such as 1m30s`},
		{name: "a timeout variable it does not read", args: []string{"sandbox", "ls", "-q"}, timeoutVar: "soon", stdout: "sb7\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeDaemon(t)
			d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
			if tt.timeoutVar != "" {
				t.Setenv(envRunTimeout, tt.timeoutVar)
			}
			code, stdout, stderr := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout with %q, stderr with %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
			if code == 2 && stdout != "" {
				t.Errorf("a usage error printed on stdout: %q", stdout)
			}
		})
	}
}

// TestErrorNextStep checks that report follows a failure whose cause the
// user can act on with the command that does it, and prints each of
// several failures as it prints one.
func TestErrorNextStep(t *testing.T) {
	notReady := func(status api.SandboxStatus) error {
		return fmt.Errorf("exec in sandbox sb1: %w", &client.APIError{StatusCode: http.StatusConflict, Code: api.CodeSandboxNotReady,
			Message: "sandbox sb1 is " + string(status) + ", not running", Details: map[string]any{"sandbox_id": "sb1", "status": string(status)}})
	}
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/api/v1/sandboxes",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no daemon", fmt.Errorf("list sandboxes: %w", refused),
			"agent2env sandbox: list sandboxes: Get \"http://127.0.0.1:1/api/v1/sandboxes\": dial tcp: connect: connection refused\n" +
				"  no daemon answers there: start one with \"agent2env serve\", or give its URL with --url or $AGENT2ENV_URL\n"},
		{"no token", fmt.Errorf("list sandboxes: %w", &client.APIError{StatusCode: 401, Code: api.CodeUnauthorized, Message: "authentication required"}),
			"agent2env sandbox: list sandboxes: authentication required (UNAUTHORIZED, HTTP 401)\n" +
				"  the daemon wants a token: give it with --token or $AGENT2ENV_TOKEN, or save it with \"agent2env login\"\n"},
		{"paused", notReady(api.StatusPaused),
			"agent2env sandbox: exec in sandbox sb1: sandbox sb1 is paused, not running (SANDBOX_NOT_READY, HTTP 409)\n" +
				"  resume it with: agent2env sandbox resume sb1\n"},
		{"stopped", notReady(api.StatusSucceeded),
			"agent2env sandbox: exec in sandbox sb1: sandbox sb1 is succeeded, not running (SANDBOX_NOT_READY, HTTP 409)\n" +
				"  start it again with: agent2env sandbox start sb1\n"},
		{"pending: nothing to do but wait", notReady(api.StatusPending),
			"agent2env sandbox: exec in sandbox sb1: sandbox sb1 is pending, not running (SANDBOX_NOT_READY, HTTP 409)\n"},
		{"several, each named", errors.Join(errors.New("delete sandbox a: not found"), notReady(api.StatusPaused), errors.New("delete sandbox c: not found")),
			"agent2env sandbox: delete sandbox a: not found\n" +
				"agent2env sandbox: exec in sandbox sb1: sandbox sb1 is paused, not running (SANDBOX_NOT_READY, HTTP 409)\n" +
				"  resume it with: agent2env sandbox resume sb1\n" +
				"agent2env sandbox: delete sandbox c: not found\n"},
	}
	root := newRoot(env{})
	cmd, _, err := root.Find([]string{"sandbox", "exec"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if code := report(&b, cmd, tt.err); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLegacyFlags checks that the single-dash long flags of before cobra
// still work, and that the arguments of a remote command are left alone.
func TestLegacyFlags(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	check(t, []string{"sandbox", "create", "-image", "ready", "-env", "A=-json", "-ttl=5"}, result{Stdout: "sb1\n"})
	if got := d.creates[0]; got.Image != "ready" || got.Env["A"] != "-json" || got.TTL == nil || *got.TTL != 5 {
		t.Errorf("create request %+v", got)
	}
	if code, stdout, stderr := run(t, "sandbox", "ls", "-json"); code != 0 || !strings.HasPrefix(stdout, "{\n  \"items\"") {
		t.Errorf("ls -json: exit %d\n%s%s", code, stdout, stderr)
	}
	check(t, []string{"sandbox", "exec", "-cwd", "/", "sb7", "echo", "-env", "-json"}, result{Stdout: "-env -json\n"})
	check(t, []string{"sandbox", "exec", "sb7", "-timeout", "5", "--", "echo", "-cwd"}, result{Stdout: "-cwd\n"})
	want := []api.ExecRequest{
		{Command: []string{"echo", "-env", "-json"}, Cwd: "/", OutputEncoding: api.OutputBase64},
		{Command: []string{"echo", "-cwd"}, Timeout: 5, OutputEncoding: api.OutputBase64},
	}
	if diff := cmp.Diff(want, d.execs); diff != "" {
		t.Errorf("exec requests (-want +got):\n%s", diff)
	}
}

// decodeStrict decodes b as a T, refusing fields T does not have.
func decodeStrict[T any](b []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	return v, err
}

// yamlToJSON converts YAML that printYAML wrote back to JSON.
func yamlToJSON(b []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// checkListOutput runs a list command with -o json, -o yaml and -q and
// checks that the JSON and YAML decode as T, to want, and -q prints ids.
func checkListOutput[T any](t *testing.T, args []string, want T, ids string) {
	t.Helper()
	code, out, stderr := run(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("%v -o json: exit %d: %s", args, code, stderr)
	}
	got, err := decodeStrict[T]([]byte(out))
	if err != nil {
		t.Fatalf("%v -o json does not decode as %T: %v\n%s", args, want, err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%v -o json (-want +got):\n%s", args, diff)
	}
	code, out, stderr = run(t, append(args, "-o", "yaml")...)
	if code != 0 {
		t.Fatalf("%v -o yaml: exit %d: %s", args, code, stderr)
	}
	j, err := yamlToJSON([]byte(out))
	if err == nil {
		got, err = decodeStrict[T](j)
	}
	if err != nil {
		t.Fatalf("%v -o yaml does not decode as %T: %v\n%s", args, want, err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%v -o yaml (-want +got):\n%s", args, diff)
	}
	if _, out, _ := run(t, append(args, "-q")...); out != ids {
		t.Errorf("%v -q printed %q, want %q", args, out, ids)
	}
	code, wide, _ := run(t, append(args, "-o", "wide")...)
	_, table, _ := run(t, args...)
	if head := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }; code != 0 || len(head(wide)) <= len(head(table)) {
		t.Errorf("%v -o wide has no more columns than the table:\n%s\n%s", args, wide, table)
	}
}

func TestListOutput(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("sandbox ls", func(t *testing.T) {
		d := newFakeDaemon(t)
		sbs := []api.Sandbox{
			{ID: "sb7", Image: "alpine", CPU: "1", Memory: "512Mi", TTL: 60, Status: api.StatusRunning, Env: map[string]string{"A": "1"},
				Template: "py", TemplateVersion: 2, CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(time.Minute), AccessToken: "tok", AccessURL: "http://x/"},
			{ID: "sb8", Image: "broken", Status: api.StatusFailed, Reason: "no such image", CreatedAt: at, ExpiresAt: api.Never},
		}
		for _, sb := range sbs {
			d.addSandbox(sb)
		}
		checkListOutput(t, []string{"sandbox", "ls"}, api.List[api.Sandbox]{Items: sbs}, "sb7\nsb8\n")
	})
	t.Run("image ls", func(t *testing.T) {
		d := newFakeDaemon(t)
		d.images = []api.Image{{Ref: "docker.io/library/alpine:3.20", Digest: "sha256:d", ID: "sha256:0123", Size: 3 << 20, Layers: 1, Created: at}}
		checkListOutput(t, []string{"image", "ls"}, api.List[api.Image]{Items: d.images}, "docker.io/library/alpine:3.20\n")
	})
	t.Run("template ls and versions", func(t *testing.T) {
		d := newTemplateDaemon(t)
		d.create(t, "a", "alpine", "x")
		d.create(t, "b", "busybox")
		l, err := d.cl.Template.List(t.Context(), client.ListTemplatesOptions{Page: 1, PageSize: 20})
		if err != nil {
			t.Fatal(err)
		}
		checkListOutput(t, []string{"template", "ls"}, *l, "a\nb\n")
		vl, err := d.cl.Template.ListVersions(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		checkListOutput(t, []string{"template", "versions", "a"}, *vl, "1\n")
	})
	t.Run("prepull ls", func(t *testing.T) {
		d := newFakePrepullDaemon(t)
		tasks := []api.PrepullTask{
			{ID: "pp-7", Image: "alpine", Status: api.PrepullCompleted, Progress: api.PrepullProgress{Ready: 1, Total: 1}, StartedAt: at, CompletedAt: &at},
			{ID: "pp-8", Image: "python", Status: api.PrepullFailed, Template: "py", Error: "manifest unknown", StartedAt: at},
		}
		for _, task := range tasks {
			d.add(task)
		}
		// The newest first.
		slices.Reverse(tasks)
		checkListOutput(t, []string{"prepull", "ls"}, api.List[api.PrepullTask]{Items: tasks}, "pp-8\npp-7\n")
	})
	t.Run("context ls", func(t *testing.T) {
		d := newFakeContextDaemon(t)
		cx := api.Context{ContextID: "ctx-1", Type: "jupyter", Status: "active", Language: api.LanguagePython, SandboxID: "sb7",
			WorkingDir: "/workspace", CreatedAt: at, LastUsedAt: at, ExecutionCount: 3}
		d.add(cx)
		// The CLI prints the items of the API's ContextList.
		checkListOutput(t, []string{"context", "ls"}, api.ContextList{Items: []api.Context{cx}}, "ctx-1\n")
	})
}

func TestClientSettings(t *testing.T) {
	tests := []struct {
		name       string
		url, token string // flags
		env        map[string]string
		file       string // the config file's content; "" for none
		want       settings
		err        string
	}{
		{name: "defaults", want: settings{url: client.DefaultURL}},
		{name: "file", file: "url: http://file:1\ntoken: ftok\n", want: settings{url: "http://file:1", token: "ftok"}},
		{name: "environment over file", file: "url: http://file:1\ntoken: ftok\n",
			env:  map[string]string{"AGENT2ENV_URL": "http://env:1", "AGENT2ENV_TOKEN": "etok"},
			want: settings{url: "http://env:1", token: "etok"}},
		{name: "flags over environment", url: "http://flag:1", token: "gtok",
			env:  map[string]string{"AGENT2ENV_URL": "http://env:1", "AGENT2ENV_TOKEN": "etok"},
			want: settings{url: "http://flag:1", token: "gtok"}},
		{name: "each setting on its own", token: "gtok", file: "url: http://file:1\ntoken: ftok\n",
			want: settings{url: "http://file:1", token: "gtok"}},
		{name: "the file's token for the file's daemon only", url: "http://flag:1", file: "url: http://file:1\ntoken: ftok\n",
			want: settings{url: "http://flag:1"}},
		{name: "the file's token for its daemon named elsewhere", env: map[string]string{"AGENT2ENV_URL": "http://file:1/api/v1/"},
			file: "url: http://file:1\ntoken: ftok\n", want: settings{url: "http://file:1/api/v1/", token: "ftok"}},
		{name: "compatibility names", env: map[string]string{"MSB_SERVER_URL": "http://msb:1", "MSB_API_KEY": "mtok", "SANDBOX_BASE_URL": "http://sb:1"},
			want: settings{url: "http://msb:1", token: "mtok"}},
		{name: "ours first", env: map[string]string{"AGENT2ENV_URL": "http://env:1", "MSB_SERVER_URL": "http://msb:1", "AGENT2ENV_TOKEN": "etok", "MSB_API_KEY": "mtok"},
			want: settings{url: "http://env:1", token: "etok"}},
		{name: "seed 001's names", env: map[string]string{"SANDBOX_BASE_URL": "http://sb:1"}, want: settings{url: "http://sb:1"}},
		{name: "empty variables are unset", env: map[string]string{"AGENT2ENV_URL": "", "MSB_SERVER_URL": "http://msb:1"}, want: settings{url: "http://msb:1"}},
		{name: "unknown key in the file", file: "url: http://file:1\ntokn: x\n", err: "line 2: unknown field tokn (the file takes url and token)"},
		{name: "a value of the wrong kind in the file", file: "url: http://file:1\ntoken: [x]\n", err: "line 2: token must be a string, not a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			vars := map[string]string{"XDG_CONFIG_HOME": dir}
			for k, v := range tt.env {
				vars[k] = v
			}
			if tt.file != "" {
				os.MkdirAll(filepath.Join(dir, "agent2env"), 0o700)
				if err := os.WriteFile(filepath.Join(dir, "agent2env", "config.yaml"), []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			e := env{lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
			got, err := (&clientConfig{url: tt.url, token: tt.token}).resolve(e)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(settings{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogin saves the daemon's address with login, checks the file, and
// that client commands then use it.
func TestLogin(t *testing.T) {
	d := newFakeDaemon(t)
	url := os.Getenv(client.EnvURL)
	d.token = "s3cret"
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(client.EnvURL, "")
	path := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "agent2env", "config.yaml")

	check(t, []string{"login", "--url", url, "--token", "s3cret", "--verify=false"}, result{Stdout: "saved " + path + " for " + url + "\n"})
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v, mode %v; want 0600", err, fi.Mode())
	}
	check(t, []string{"sandbox", "ls", "-q"}, result{Stdout: "sb7\n"})
	// The environment and the flags still win.
	check(t, []string{"sandbox", "ls", "-q", "--token", "wrong"}, result{Code: 1, Stderr: "UNAUTHORIZED"})
	t.Setenv(client.EnvToken, "wrong")
	check(t, []string{"sandbox", "ls", "-q"}, result{Code: 1, Stderr: "UNAUTHORIZED"})
	t.Setenv(client.EnvToken, "")
	// --token-stdin, and login checks the daemon first.
	code, _, stderr := runIn(t, "wrong\n", "login", "--url", url, "--token-stdin")
	if code != 1 || !strings.Contains(stderr, "save anyway with --verify=false") {
		t.Errorf("login with a wrong token: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runIn(t, "s3cret\n", "login", "--url", url, "--token-stdin"); code != 0 {
		t.Errorf("login --token-stdin: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "token: s3cret\n") {
		t.Errorf("config file:\n%s", b)
	}
	// Nothing on standard input (a password manager that failed) is no
	// token: not the saved one saved again, nor none.
	before, _ := os.ReadFile(path)
	for _, in := range []string{"", "\n  \n"} {
		code, stdout, stderr := runIn(t, in, "login", "--url", url, "--token-stdin", "--verify=false")
		if code != 1 || stdout != "" || !strings.Contains(stderr, "agent2env login: --token-stdin: standard input held no token\n") {
			t.Errorf("login --token-stdin with %q: exit %d, stdout %q\n%s", in, code, stdout, stderr)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the config file changed:\n%s", after)
	}
}

// TestNoHome checks that client commands run without a home directory
// (a service, a bare container), where there is no config file to read,
// and that login, which must write one, says why it cannot.
func TestNoHome(t *testing.T) {
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	check(t, []string{"sandbox", "ls", "-q"}, result{Stdout: "sb7\n"})
	check(t, []string{"login", "--token", "x", "--verify=false"}, result{Code: 1, Stderr: "agent2env login: find the config file: $HOME is not defined\n"})
}

func TestDebug(t *testing.T) {
	d := newFakeDaemon(t)
	d.token = "s3cret"
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	code, stdout, stderr := run(t, "--debug", "sandbox", "ls", "-q", "--token", "s3cret")
	if code != 0 || stdout != "sb7\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"> GET " + os.Getenv(client.EnvURL) + "/api/v1/sandboxes\n", "> Authorization: Bearer [redacted]\n",
		"< HTTP/1.1 200 OK (", "< Content-Type: application/json\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("debug output lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "s3cret") {
		t.Errorf("debug output shows the token:\n%s", stderr)
	}
}

func TestVersion(t *testing.T) {
	self := buildinfo.Get()
	clientPart := "Client:\n  Version:     " + self.Version + "\n"
	var answer func(w http.ResponseWriter)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/version" || r.Header.Get("Authorization") != "Bearer tok" {
			http.NotFound(w, r)
			return
		}
		answer(w)
	}))
	t.Cleanup(srv.Close)
	t.Setenv(client.EnvURL, srv.URL)
	t.Setenv(client.EnvToken, "tok")
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter)
		args   []string
		want   string
	}{
		{name: "daemon reports", answer: func(w http.ResponseWriter) { fmt.Fprint(w, `{"version":"v1.2.0","commit":"def"}`) },
			want: "Daemon (" + srv.URL + "):\n  Version:     v1.2.0\n  Commit:      def\n"},
		{name: "daemon does not report", answer: func(w http.ResponseWriter) { http.NotFound(w, nil) },
			want: "Daemon (" + srv.URL + "): the daemon answers but does not report its version\n"},
		{name: "client only", args: []string{"--client"}, want: "  Platform:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer = tt.answer
			code, stdout, stderr := run(t, append([]string{"version"}, tt.args...)...)
			if code != 0 || !strings.HasPrefix(stdout, clientPart) || !strings.Contains(stdout, "  Go version:  go") ||
				!strings.Contains(stdout, tt.want) {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant %q", code, stdout, stderr, tt.want)
			}
			if tt.answer == nil && strings.Contains(stdout, "Daemon") {
				t.Errorf("--client asked the daemon:\n%s", stdout)
			}
		})
	}
	answer = func(w http.ResponseWriter) { fmt.Fprint(w, `{"version":"v1.2.0"}`) }
	_, stdout, _ := run(t, "version", "-o", "json")
	v, err := decodeStrict[versions]([]byte(stdout))
	if err != nil || v.Client.Version != self.Version || v.Daemon == nil || v.Daemon.Version != "v1.2.0" {
		t.Errorf("version -o json: %+v (%v)\n%s", v, err, stdout)
	}
}

func TestCompletion(t *testing.T) {
	tests := []struct{ shell, want string }{
		{"bash", "# bash completion V2 for agent2env"},
		{"zsh", "#compdef agent2env"},
		{"fish", "complete -c agent2env"},
		{"powershell", "Register-ArgumentCompleter -CommandName 'agent2env'"},
	}
	for _, tt := range tests {
		t.Run(tt.shell, func(t *testing.T) {
			code, stdout, stderr := run(t, "completion", tt.shell)
			if code != 0 || !strings.Contains(stdout, tt.want) || stderr != "" {
				t.Errorf("exit %d, stderr %q, script lacks %q:\n%.300s", code, stderr, tt.want, stdout)
			}
		})
	}
	// What the scripts ask the binary: commands, flags, and values, some
	// from the daemon.
	d := newFakeDaemon(t)
	d.addSandbox(api.Sandbox{ID: "sb7", Status: api.StatusRunning})
	d.addSandbox(api.Sandbox{ID: "sb8", Status: api.StatusRunning})
	asks := []struct {
		args, want string
		exact      bool
	}{
		{"__complete sandbox c", "cp\tcopy a file", false},
		{"__complete sandbox ls -o ", "wide\n", false},
		{"__complete prepull ls --status ", "failed\n", false},
		{"__complete sandbox create --t", "--template\t", false},
		{"__complete sandbox exec ", "sb7\nsb8\n:4\n", true},
		{"__complete sandbox exec sb7 ", ":4\n", true}, // the command is not the daemon's to say
		{"__complete sandbox rm sb7 ", "sb8\n:4\n", true},
		{"__complete sandbox logs --url http://127.0.0.1:1 ", ":1\n", true}, // no daemon: an error, nothing offered
	}
	for _, tt := range asks {
		_, stdout, _ := run(t, strings.Split(tt.args, " ")...)
		if !strings.Contains(stdout, tt.want) || tt.exact && stdout != tt.want {
			t.Errorf("%s: %q, want %q", tt.args, stdout, tt.want)
		}
	}
}

// TestExamplesParse runs the command line of every agent2env command in
// the examples of every command's help (and so docs/cli) and in the
// README's shell blocks as far as the command's flags: each names a
// command that exists, with flags it has, so an example copied as it is
// written is not a usage error.
func TestExamplesParse(t *testing.T) {
	lines := readmeShellLines(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range strings.Split(c.Example, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(env{stdout: io.Discard, stderr: io.Discard}))
	checked := 0
	for _, line := range lines {
		for _, args := range exampleCommands(t, line) {
			checked++
			root := newRoot(env{stdout: io.Discard, stderr: io.Discard}) // flags parsed afresh
			c, rest, err := root.Find(args)
			if err != nil || c == root || c.HasAvailableSubCommands() && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				t.Errorf("%s: no such command (%s)", line, strings.Join(args, " "))
				continue
			}
			if c.DisableFlagParsing {
				_, err = parseLeading(c, rest, 1)
			} else {
				err = c.ParseFlags(rewriteLegacy(c, rest, false))
			}
			if err != nil {
				t.Errorf("%s: %s: %v", line, c.CommandPath(), err)
			}
		}
	}
	if checked < 200 {
		t.Errorf("%d agent2env command lines checked in the examples, want at least 200", checked)
	}
}

// readmeShellLines are the lines of the README's sh blocks, continued
// lines (and quoted arguments of several lines) joined, without the
// here-documents' text.
func readmeShellLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	inBlock, hereEnd, cont := false, "", ""
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case !inBlock:
			inBlock = l == "```sh"
		case hereEnd != "":
			if l == hereEnd {
				hereEnd = ""
			}
		case l == "```":
			inBlock = false
		default:
			if _, tag, ok := strings.Cut(l, "<<"); ok {
				hereEnd = strings.Trim(strings.Fields(tag)[0], `'"`)
			}
			if s, ok := strings.CutSuffix(l, "\\"); ok {
				cont += s
				continue
			}
			if openQuote(cont + l) { // a quoted argument goes on
				cont += l + "\n"
				continue
			}
			lines = append(lines, strings.TrimSpace(cont+l))
			cont = ""
		}
	}
	return lines
}

// openQuote reports whether a shell line ends inside quotes (a comment's
// apostrophes aside).
func openQuote(line string) bool {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '#' && (i == 0 || line[i-1] == ' '):
			return false
		}
	}
	return quote != 0
}

// exampleCommands splits a shell line of an example into the arguments of
// each agent2env command in it (after a pipe or a ;, sudo or variables, or
// in $(...)), quotes removed and comments dropped; a $(...) is one
// argument of the command around it.
func exampleCommands(t *testing.T, line string) [][]string {
	t.Helper()
	var cmds [][]string
	var words []string // the command being read; nested $(...) push it
	var stack [][]string
	var word strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	flush := func() {
		end()
		i := 0
		for i < len(words) && (words[i] == "sudo" || strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-")) {
			i++ // sudo, and the variables a command is given
		}
		if i < len(words) && words[i] == "agent2env" {
			cmds = append(cmds, words[i+1:])
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(line[i+1:], ch)
			if j < 0 {
				t.Fatalf("%s: unbalanced quote", line)
			}
			quoted := line[i+1 : i+1+j]
			if ch == '"' && strings.Contains(quoted, "$(") {
				cmds = append(cmds, exampleCommands(t, quoted)...)
			}
			word.WriteString(quoted)
			inWord = true
			i += j + 1
		case ch == '$' && i+1 < len(line) && line[i+1] == '(':
			end()
			stack = append(stack, words)
			words = nil
			i++
		case ch == ')' && len(stack) > 0:
			flush()
			words = append(stack[len(stack)-1], "$(...)")
			stack = stack[:len(stack)-1]
		case ch == '|' || ch == ';' || ch == '<' || ch == '>':
			flush()
			if ch == '<' || ch == '>' { // the redirection's target is no command
				for i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '>') {
					i++
				}
				for i+1 < len(line) && line[i+1] != ' ' {
					i++
				}
			}
		case ch == '#' && !inWord:
			i = len(line)
		case ch == ' ' || ch == '\t':
			end()
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return cmds
}

// TestHelpWrapped wants a help text either on one line, which the
// terminal wraps, or wrapped by hand throughout: a line of a wrapped text
// that runs on past the others reads as a mistake.
func TestHelpWrapped(t *testing.T) {
	const width = 95
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if lines := strings.Split(c.Long, "\n"); len(lines) > 1 {
			for _, l := range lines {
				if utf8.RuneCountInString(l) > width {
					t.Errorf("%s: a line of its wrapped help is longer than %d characters: %q", c.CommandPath(), width, l)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(env{stdout: io.Discard, stderr: io.Discard}))
}

// TestExamples wants an example in the help of every command (cobra's
// completion scripts explain themselves).
func TestExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.IsAvailableCommand() && c.Example == "" && c.Parent().Name() != "completion" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range newRoot(env{stdout: io.Discard, stderr: io.Discard}).Commands() {
		walk(c)
	}
}
