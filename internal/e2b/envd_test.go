package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem/filesystemconnect"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/process"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/process/processconnect"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// chunk is output a fake process wrote: to stdout unless stderr.
type chunk struct {
	stderr bool
	text   string
}

// fakeProcs is the sandbox's background processes in memory. A process's
// output is its chunks; its output read ends as end says, after hold is
// closed when hold is set. StartFollowProc "starts" the first process added.
type fakeProcs struct {
	mu      sync.Mutex
	procs   []service.ProcDetail
	output  map[string][]chunk
	end     map[string]service.Proc
	hold    chan struct{}
	starts  []string // each StartFollowProc's request, as text
	since   []int64  // each ProcOutput's offset
	inputs  map[string]string
	closed  []string
	signals []string
	resized []string
}

func newFakeProcs() *fakeProcs {
	return &fakeProcs{output: map[string][]chunk{}, end: map[string]service.Proc{}, inputs: map[string]string{}}
}

// add makes a process known, with the output it writes and how it ends.
func (f *fakeProcs) add(p service.ProcDetail, end service.Proc, out ...chunk) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs = append(f.procs, p)
	f.output[p.ID] = out
	f.end[p.ID] = end
}

func (f *fakeProcs) StartFollowProc(ctx context.Context, id string, req service.ProcRequest, pio service.ProcIO, started func(service.ProcDetail) error, out service.TerminalOutput) (service.ProcOutputResult, error) {
	f.mu.Lock()
	f.starts = append(f.starts, fmt.Sprintf("%s %q env=%v cwd=%s timeout=%s tag=%s tty=%t %dx%d stdin=%t flow=%t",
		id, req.Command, req.Env, req.Cwd, req.Timeout, pio.Tag, pio.TTY, pio.Rows, pio.Cols, pio.Stdin, pio.FlowControl))
	f.mu.Unlock()
	if req.Command[0] == "/no/such" {
		return service.ProcOutputResult{}, errdefs.Invalid("executable /no/such not found")
	}
	f.mu.Lock()
	p := f.procs[0] // the tests that start add one process
	f.mu.Unlock()
	if err := started(p); err != nil {
		return service.ProcOutputResult{}, err
	}
	return f.FollowProc(ctx, id, p.ID, 0, out)
}

func (f *fakeProcs) Procs(context.Context, string) ([]service.ProcDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.procs), nil
}

func (f *fakeProcs) FollowProc(ctx context.Context, _, pid string, since int64, out service.TerminalOutput) (service.ProcOutputResult, error) {
	f.mu.Lock()
	f.since = append(f.since, since)
	chunks, end, hold := f.output[pid], f.end[pid], f.hold
	f.mu.Unlock()
	at := since
	for _, c := range chunks {
		stream := api.TerminalStreamStdout
		if c.stderr {
			stream = api.TerminalStreamStderr
		}
		if err := out(stream, at, []byte(c.text)); err != nil {
			return service.ProcOutputResult{}, err
		}
		at += int64(len(c.text))
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return service.ProcOutputResult{}, ctx.Err()
		}
	}
	return service.ProcOutputResult{Next: at, Proc: end}, nil
}

func (f *fakeProcs) ProcInput(_ context.Context, _, pid string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs[pid] += string(b)
	return nil
}

func (f *fakeProcs) CloseProcInput(_ context.Context, _, pid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, pid)
	return nil
}

func (f *fakeProcs) SignalProc(_ context.Context, _, pid, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, pid+" "+sig)
	return nil
}

func (f *fakeProcs) ResizeProc(_ context.Context, _, pid string, rows, cols uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resized = append(f.resized, fmt.Sprintf("%s %dx%d", pid, rows, cols))
	return nil
}

// Directory operations of fakeFiles: a directory is one made, or a parent
// of a file; its files are 0644 and its directories 0755, all the
// sandbox user's; a link is in links, which Walk does not list.

func (f *fakeFiles) isDir(id, p string) bool {
	if p == "/" || f.dirs[id+":"+p] {
		return true
	}
	for k := range f.byPath {
		if strings.HasPrefix(k, id+":"+p+"/") {
			return true
		}
	}
	return false
}

func (f *fakeFiles) statLocked(id, p string) (*service.FileStat, error) {
	fi := service.FileStat{UID: sandboxUID, GID: sandboxUID}
	fi.Name, fi.Path, fi.ModTime = path.Base(p), p, now
	if target, ok := f.links[id+":"+p]; ok {
		fi.Link, fi.FullMode, fi.Mode = target, fs.ModeSymlink|0o777, "0777"
		return &fi, nil
	}
	if c, ok := f.byPath[id+":"+p]; ok {
		fi.Size, fi.Regular, fi.FullMode, fi.Mode = int64(len(c)), true, 0o644, "0644"
		return &fi, nil
	}
	if f.isDir(id, p) {
		fi.IsDir, fi.FullMode, fi.Mode = true, fs.ModeDir|0o755, "0755"
		return &fi, nil
	}
	return nil, errdefs.NotFound("file %s not found", p)
}

func (f *fakeFiles) Stat(_ context.Context, id, p string) (*service.FileStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statLocked(id, p)
}

func (f *fakeFiles) Walk(_ context.Context, id, root string, depth int) ([]service.FileStat, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fi, err := f.statLocked(id, root); err != nil || !fi.IsDir {
		return nil, false, errdefs.Invalid("%s is not a directory", root)
	}
	seen := map[string]bool{}
	for k := range f.byPath {
		for p := strings.TrimPrefix(k, id+":"); strings.HasPrefix(p, root+"/"); p = path.Dir(p) {
			seen[p] = true
		}
	}
	for k := range f.dirs {
		if p := strings.TrimPrefix(k, id+":"); strings.HasPrefix(p, root+"/") {
			seen[p] = true
		}
	}
	var out []service.FileStat
	for p := range seen {
		if depth > 0 && strings.Count(strings.TrimPrefix(p, root+"/"), "/") >= depth {
			continue
		}
		fi, _ := f.statLocked(id, p)
		out = append(out, *fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, false, nil
}

func (f *fakeFiles) Mkdir(_ context.Context, id, p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ; p != "/"; p = path.Dir(p) {
		f.dirs[id+":"+p] = true
	}
	return nil
}

func (f *fakeFiles) Move(_ context.Context, id, from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.byPath[id+":"+from]
	if !ok {
		return errdefs.NotFound("file %s not found", from)
	}
	delete(f.byPath, id+":"+from)
	f.byPath[id+":"+to] = c
	return nil
}

func (f *fakeFiles) Remove(_ context.Context, id, p string, recursive bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !recursive {
		return errdefs.Invalid("the fake removes recursively only")
	}
	if _, err := f.statLocked(id, p); err != nil {
		return err
	}
	for k := range f.byPath {
		if k == id+":"+p || strings.HasPrefix(k, id+":"+p+"/") {
			delete(f.byPath, k)
		}
	}
	for k := range f.dirs {
		if k == id+":"+p || strings.HasPrefix(k, id+":"+p+"/") {
			delete(f.dirs, k)
		}
	}
	return nil
}

// fakeWatch is a watch whose changes the test sends on events.
type fakeWatch struct {
	root      string
	events    chan service.FileEvent
	closed    chan struct{}
	closeOnce sync.Once
}

func (w *fakeWatch) Next() (service.FileEvent, error) {
	select {
	case ev := <-w.events:
		return ev, nil
	case <-w.closed:
		return service.FileEvent{}, errdefs.Unavailable("the watch is closed")
	}
}

func (w *fakeWatch) Close() error {
	w.closeOnce.Do(func() { close(w.closed) })
	return nil
}

func (w *fakeWatch) Root() string { return w.root }

// WatchDir returns a fakeWatch of a directory, which the test finds in
// watches.
func (f *fakeFiles) WatchDir(_ context.Context, id, dir string, _ bool) (service.DirWatcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := f.statLocked(id, dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir {
		return nil, errdefs.Invalid("%s is not a directory", dir)
	}
	w := &fakeWatch{root: dir, events: make(chan service.FileEvent), closed: make(chan struct{})}
	f.watches = append(f.watches, w)
	return w, nil
}

// lastWatch is the watch WatchDir made last.
func (f *fakeFiles) lastWatch() *fakeWatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watches[len(f.watches)-1]
}

// headerTransport sets headers on every request: E2B's sandbox and token.
type headerTransport http.Header

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// envdClient returns an HTTP client to sandbox id's envd, with extra
// headers (pairs).
func (e *env) envdClient(id string, headers ...string) *http.Client {
	h := http.Header{}
	h.Set(HeaderSandboxID, id)
	h.Set(HeaderSandboxPort, "49983")
	h.Set(HeaderAccessToken, token)
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	return &http.Client{Transport: headerTransport(h)}
}

// processClient is a Connect client of sandbox sba's process service that
// speaks JSON, as the Python SDK does.
func (e *env) processClient(headers ...string) processconnect.ProcessClient {
	return processconnect.NewProcessClient(e.envdClient("sba", headers...), e.srv.URL, connect.WithProtoJSON())
}

func (e *env) filesystemClient(headers ...string) filesystemconnect.FilesystemClient {
	return filesystemconnect.NewFilesystemClient(e.envdClient("sba", headers...), e.srv.URL, connect.WithProtoJSON())
}

// eventText is ev in a line.
func eventText(ev *process.ProcessEvent) string {
	switch x := ev.GetEvent().(type) {
	case *process.ProcessEvent_Start:
		return fmt.Sprintf("start %d", x.Start.GetPid())
	case *process.ProcessEvent_Data:
		switch o := x.Data.GetOutput().(type) {
		case *process.ProcessEvent_DataEvent_Stdout:
			return "stdout " + string(o.Stdout)
		case *process.ProcessEvent_DataEvent_Stderr:
			return "stderr " + string(o.Stderr)
		case *process.ProcessEvent_DataEvent_Pty:
			return "pty " + string(o.Pty)
		}
	case *process.ProcessEvent_End:
		e := x.End
		return fmt.Sprintf("end %d %t %q error=%v", e.GetExitCode(), e.GetExited(), e.GetStatus(), e.Error != nil)
	case *process.ProcessEvent_Keepalive:
		return "keepalive"
	}
	return "?"
}

// startEvents runs Start and returns its events and its error.
func startEvents(t *testing.T, c processconnect.ProcessClient, msg *process.StartRequest, header http.Header) ([]string, error) {
	t.Helper()
	req := connect.NewRequest(msg)
	for k, v := range header {
		req.Header()[k] = v
	}
	stream, err := c.Start(context.Background(), req)
	if err != nil {
		return nil, err
	}
	return eventsOf(stream)
}

// eventsOf reads a process stream to its end.
func eventsOf[T any, PT interface {
	*T
	GetEvent() *process.ProcessEvent
}](stream *connect.ServerStreamForClient[T]) ([]string, error) {
	defer stream.Close()
	var got []string
	for stream.Receive() {
		got = append(got, eventText(PT(stream.Msg()).GetEvent()))
	}
	return got, stream.Err()
}

func bash(cmd string) *process.ProcessConfig {
	return &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}
}

func TestProcessStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		proc service.ProcDetail
		end  service.Proc
		out  []chunk
		want []string
	}{
		{"exit 0", service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 41},
			service.Proc{ExitCode: 0}, []chunk{{false, "hi\n"}, {true, "warn\n"}},
			[]string{"start 41", "stdout hi\n", "stderr warn\n", `end 0 true "exit status 0" error=false`}},
		{"exit 3", service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 42},
			service.Proc{ExitCode: 3}, nil,
			[]string{"start 42", `end 3 true "exit status 3" error=true`}},
		{"killed", service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 43},
			service.Proc{ExitCode: 137, Signal: "SIGKILL"}, []chunk{{false, "a"}},
			[]string{"start 43", "stdout a", `end -1 false "signal: killed" error=true`}},
		{"pty", service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 44, TTY: true},
			service.Proc{ExitCode: 0}, []chunk{{false, "$ "}},
			[]string{"start 44", "pty $ ", `end 0 true "exit status 0" error=false`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, running("sba", nil))
			e.procs.add(tc.proc, tc.end, tc.out...)
			got, err := startEvents(t, e.processClient(), &process.StartRequest{Process: bash("echo hi")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if e.procs.since[0] != 0 {
				t.Errorf("the output was read from %d, want 0", e.procs.since[0])
			}
		})
	}
}

func TestStartRequest(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		msg     *process.StartRequest
		timeout time.Duration
		want    string // the fields of the service's request and I/O
	}{
		{"defaults", &process.StartRequest{Process: bash("ls")}, 0,
			`["/bin/bash" "-l" "-c" "ls"] env=map[] cwd=` + service.HomeDir + ` timeout=0s tag= tty=false 0x0 stdin=true`},
		{"no stdin, timeout", &process.StartRequest{Process: bash("ls"), Stdin: &no}, time.Minute,
			`["/bin/bash" "-l" "-c" "ls"] env=map[] cwd=` + service.HomeDir + ` timeout=1m0s tag= tty=false 0x0 stdin=false`},
		{"stdin", &process.StartRequest{Process: bash("ls"), Stdin: &yes}, 0,
			`["/bin/bash" "-l" "-c" "ls"] env=map[] cwd=` + service.HomeDir + ` timeout=0s tag= tty=false 0x0 stdin=true`},
		{"relative cwd, envs, tag", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "ls", Envs: map[string]string{"A": "1"}, Cwd: ptr("src")}, Tag: ptr("t1")}, 0,
			`["ls"] env=map[A:1] cwd=` + service.HomeDir + `/src timeout=0s tag=t1 tty=false 0x0 stdin=true`},
		{"home cwd", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "ls", Cwd: ptr("~/x")}}, 0,
			`["ls"] env=map[] cwd=` + service.HomeDir + `/x timeout=0s tag= tty=false 0x0 stdin=true`},
		{"pty", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-i", "-l"}, Cwd: ptr("/tmp")},
			Pty: &process.PTY{Size: &process.PTY_Size{Rows: 30, Cols: 100}}}, 0,
			`["/bin/bash" "-i" "-l"] env=map[] cwd=/tmp timeout=0s tag= tty=true 30x100 stdin=false`},
		// envd cuts a size to its low 16 bits, never refusing one.
		{"pty too large for a terminal", &process.StartRequest{Process: bash("ls"), Pty: &process.PTY{Size: &process.PTY_Size{Rows: 1<<20 + 30, Cols: 70000}}}, 0,
			`["/bin/bash" "-l" "-c" "ls"] env=map[] cwd=` + service.HomeDir + ` timeout=0s tag= tty=true 30x4464 stdin=false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, pio, err := startRequest(tc.msg, tc.timeout)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%q env=%v cwd=%s timeout=%s tag=%s tty=%t %dx%d stdin=%t",
				req.Command, req.Env, req.Cwd, req.Timeout, pio.Tag, pio.TTY, pio.Rows, pio.Cols, pio.Stdin)
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for name, msg := range map[string]*process.StartRequest{
		"no cmd":    {Process: &process.ProcessConfig{}},
		"long cwd":  {Process: &process.ProcessConfig{Cmd: "ls", Cwd: ptr(strings.Repeat("a/", 2048))}},
		"no config": {},
	} {
		if _, _, err := startRequest(msg, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an invalid argument", name, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestProcessStartWire checks what Start passes on from the wire: the
// user, the timeout header and the start's failure.
func TestProcessStartWire(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 7}, service.Proc{})
	basic := func(user string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":")) }
	h := http.Header{}
	h.Set("Authorization", basic("user"))
	h.Set("Connect-Timeout-Ms", "60000")
	if _, err := startEvents(t, e.processClient(), &process.StartRequest{Process: bash("true"), Stdin: ptr(false)}, h); err != nil {
		t.Fatal(err)
	}
	want := `sba ["/bin/bash" "-l" "-c" "true"] env=map[] cwd=` + service.HomeDir + ` timeout=1m0s tag= tty=false 0x0 stdin=false flow=true`
	if len(e.procs.starts) != 1 || e.procs.starts[0] != want {
		t.Errorf("started %q, want %q", e.procs.starts, want)
	}
	for _, tc := range []struct {
		name   string
		msg    *process.StartRequest
		header []string
		code   connect.Code
	}{
		{"root", &process.StartRequest{Process: bash("id")}, []string{"Authorization", basic("root")}, connect.CodePermissionDenied},
		{"other user", &process.StartRequest{Process: bash("id")}, []string{"Authorization", basic("bob")}, connect.CodeInvalidArgument},
		{"bearer", &process.StartRequest{Process: bash("id")}, []string{"Authorization", "Bearer x"}, connect.CodeInvalidArgument},
		{"start fails", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/no/such"}}, nil, connect.CodeInvalidArgument},
	} {
		h := http.Header{}
		for i := 0; i+1 < len(tc.header); i += 2 {
			h.Set(tc.header[i], tc.header[i+1])
		}
		_, err := startEvents(t, e.processClient(), tc.msg, h)
		if connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
}

// TestProcessKeepalive checks that a quiet stream gets keepalives at the
// client's interval, and none after its end.
func TestProcessKeepalive(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	e.procs.hold = make(chan struct{})
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 9}, service.Proc{}, chunk{false, "x"})
	time.AfterFunc(2500*time.Millisecond, func() { close(e.procs.hold) })
	h := http.Header{}
	h.Set(headerKeepalive, "1")
	got, err := startEvents(t, e.processClient(), &process.StartRequest{Process: bash("sleep 2")}, h)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start 9", "stdout x", "keepalive", "keepalive", `end 0 true "exit status 0" error=false`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestKeepaliveInterval: the client's Keepalive-Ping-Interval in seconds,
// none when it is not a positive number, and at most maxKeepalive. An
// interval past time.Duration's range wrapped round: 20211507185753197 s
// was 512 ns, a stream of keepalives without pause.
func TestKeepaliveInterval(t *testing.T) {
	const wraps = "20211507185753197" // × time.Second mod 2^64: 512 ns
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"x", 0},
		{"0", 0},
		{"-5", 0},
		{"30", 30 * time.Second},
		{"86400", maxKeepalive},
		{"86401", maxKeepalive},
		{"9223372037", maxKeepalive},
		{wraps, maxKeepalive},
		{"99999999999999999999", 0}, // not an int
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set(headerKeepalive, tt.header)
		if got := keepaliveInterval(h); got != tt.want {
			t.Errorf("keepaliveInterval(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}

	// On the wire: a process quiet for 200 ms has its start and its end.
	e := newEnv(t, running("sba", nil))
	e.procs.hold = make(chan struct{})
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true}, Pid: 9}, service.Proc{})
	time.AfterFunc(200*time.Millisecond, func() { close(e.procs.hold) })
	h := http.Header{}
	h.Set(headerKeepalive, wraps)
	got, err := startEvents(t, e.processClient(), &process.StartRequest{Process: bash("sleep 1")}, h)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start 9", `end 0 true "exit status 0" error=false`}; !slices.Equal(got, want) {
		t.Errorf("%d events, the first %q; want %q", len(got), got[:min(len(got), 3)], want)
	}
}

// TestProcessConnect checks Connect: the process by pid (a running one
// before an ended one of the same pid) or tag, its output from now on,
// and NotFound for no such process.
func TestProcessConnect(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-1", Output: 5}, Pid: 50}, service.Proc{ExitCode: 1})
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-2", Running: true, Output: 12}, Pid: 50, Tag: "srv"}, service.Proc{ExitCode: 0}, chunk{false, "late"})
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-3", Output: 3}, Pid: 60}, service.Proc{ExitCode: 2})
	connectTo := func(sel *process.ProcessSelector) ([]string, error) {
		stream, err := e.processClient().Connect(context.Background(), connect.NewRequest(&process.ConnectRequest{Process: sel}))
		if err != nil {
			return nil, err
		}
		return eventsOf(stream)
	}
	for _, tc := range []struct {
		name  string
		sel   *process.ProcessSelector
		want  []string
		since int64
	}{
		{"by pid, the running one", &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: 50}},
			[]string{"start 50", "stdout late", `end 0 true "exit status 0" error=false`}, 12},
		{"by tag", &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "srv"}},
			[]string{"start 50", "stdout late", `end 0 true "exit status 0" error=false`}, 12},
		{"ended", &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: 60}},
			[]string{"start 60", `end 2 true "exit status 2" error=true`}, 3},
	} {
		e.procs.since = nil
		got, err := connectTo(tc.sel)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", tc.name, diff)
		}
		if len(e.procs.since) != 1 || e.procs.since[0] != tc.since {
			t.Errorf("%s: output read from %v, want %d", tc.name, e.procs.since, tc.since)
		}
	}
	for name, sel := range map[string]*process.ProcessSelector{
		"unknown pid": {Selector: &process.ProcessSelector_Pid{Pid: 70}},
		"unknown tag": {Selector: &process.ProcessSelector_Tag{Tag: "nope"}},
	} {
		if _, err := connectTo(sel); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s: %v, want not_found", name, err)
		}
	}
	if _, err := connectTo(&process.ProcessSelector{}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("no selector: %v, want invalid_argument", err)
	}
}

// TestProcessControl checks List, SendInput, StreamInput, SendSignal,
// CloseStdin and Update on running processes, and NotFound for an ended
// one, as envd, which forgets ended processes.
func TestProcessControl(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true, Command: []string{"/bin/bash", "-l", "-c", "cat"}}, Pid: 10, Tag: "cat"}, service.Proc{})
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-2", Running: true, Command: []string{"/bin/bash", "-i", "-l"}}, Pid: 11, TTY: true}, service.Proc{})
	e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-3", Command: []string{"true"}}, Pid: 12}, service.Proc{})
	c := e.processClient()
	ctx := context.Background()
	pid := func(n uint32) *process.ProcessSelector {
		return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: n}}
	}

	list, err := c.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, p := range list.Msg.GetProcesses() {
		listed = append(listed, fmt.Sprintf("%d %s %q tag=%v", p.GetPid(), p.GetConfig().GetCmd(), p.GetConfig().GetArgs(), p.Tag != nil && p.GetTag() == "cat"))
	}
	if diff := cmp.Diff([]string{`10 /bin/bash ["-l" "-c" "cat"] tag=true`, `11 /bin/bash ["-i" "-l"] tag=false`}, listed); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}

	steps := []struct {
		name string
		call func() error
		code connect.Code // 0: success
	}{
		{"stdin", func() error {
			_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pid(10), Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("a\n")}}}))
			return err
		}, 0},
		{"pty input", func() error {
			_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pid(11), Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("ls\r")}}}))
			return err
		}, 0},
		{"stream input", func() error {
			stream := c.StreamInput(ctx)
			for _, m := range []*process.StreamInputRequest{
				{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "cat"}}}}},
				{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("b")}}}}},
				{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}},
				{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("c")}}}}},
			} {
				if err := stream.Send(m); err != nil {
					return err
				}
			}
			_, err := stream.CloseAndReceive()
			return err
		}, 0},
		{"stream input without start", func() error {
			stream := c.StreamInput(ctx)
			_ = stream.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{}}}})
			_, err := stream.CloseAndReceive()
			return err
		}, connect.CodeInvalidArgument},
		{"close stdin", func() error {
			_, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pid(10)}))
			return err
		}, 0},
		{"close a pty's stdin", func() error {
			_, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pid(11)}))
			return err
		}, connect.CodeFailedPrecondition},
		{"resize", func() error {
			_, err := c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: pid(11), Pty: &process.PTY{Size: &process.PTY_Size{Rows: 40, Cols: 120}}}))
			return err
		}, 0},
		{"resize beyond a terminal's size, cut as envd's", func() error {
			_, err := c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: pid(11), Pty: &process.PTY{Size: &process.PTY_Size{Rows: 65536 + 50, Cols: 70000}}}))
			return err
		}, 0},
		{"kill", func() error {
			_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pid(10), Signal: process.Signal_SIGNAL_SIGKILL}))
			return err
		}, 0},
		{"term", func() error {
			_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pid(11), Signal: process.Signal_SIGNAL_SIGTERM}))
			return err
		}, 0},
		{"no signal", func() error {
			_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pid(11)}))
			return err
		}, connect.CodeInvalidArgument},
		{"kill an ended one", func() error {
			_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pid(12), Signal: process.Signal_SIGNAL_SIGKILL}))
			return err
		}, connect.CodeNotFound},
		{"input to an unknown one", func() error {
			_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pid(99), Input: &process.ProcessInput{}}))
			return err
		}, connect.CodeNotFound},
	}
	for _, s := range steps {
		if err := s.call(); connect.CodeOf(err) != s.code && (s.code != 0 || err != nil) {
			t.Errorf("%s: %v, want code %v", s.name, err, s.code)
		}
	}
	if got := e.procs.inputs; got["proc-1"] != "a\nbc" || got["proc-2"] != "ls\r" {
		t.Errorf("inputs %q", got)
	}
	if diff := cmp.Diff([]string{"proc-1"}, e.procs.closed); diff != "" {
		t.Errorf("closed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"proc-2 40x120", "proc-2 50x4464"}, e.procs.resized); diff != "" {
		t.Errorf("resized (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"proc-1 KILL", "proc-2 TERM"}, e.procs.signals); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
}

func TestRPCError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code connect.Code
	}{
		{errdefs.NotFound("x"), connect.CodeNotFound},
		{fmt.Errorf("start: %w", errdefs.Invalid("x")), connect.CodeInvalidArgument},
		{errdefs.Conflict("x"), connect.CodeAlreadyExists},
		{errdefs.Precondition("x"), connect.CodeFailedPrecondition},
		{errdefs.Forbidden("x"), connect.CodePermissionDenied},
		{errdefs.Unavailable("x"), connect.CodeUnavailable},
		{fmt.Errorf("walk: %w", errdefs.ErrResourceExhausted), connect.CodeResourceExhausted},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{context.Canceled, connect.CodeCanceled},
		{connect.NewError(connect.CodeAborted, errors.New("x")), connect.CodeAborted},
		{errors.New("boom"), connect.CodeInternal},
	} {
		if got := connect.CodeOf(rpcError(tc.err)); got != tc.code {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.code)
		}
	}
	if rpcError(nil) != nil {
		t.Error("rpcError(nil) is not nil")
	}
}

// entryText is e in a line.
func entryText(e *filesystem.EntryInfo) string {
	return fmt.Sprintf("%s %v %s %d %o %s %s:%s %s", e.GetName(), e.GetType(), e.GetPath(), e.GetSize(), e.GetMode(),
		e.GetPermissions(), e.GetOwner(), e.GetGroup(), e.GetModifiedTime().AsTime().Format(time.RFC3339))
}

func TestFilesystem(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	home := service.HomeDir
	e.files.byPath["sba:"+home+"/a.txt"] = "hello"
	e.files.byPath["sba:"+home+"/d/b.txt"] = "bb"
	c := e.filesystemClient()
	ctx := context.Background()
	t0 := now.Format(time.RFC3339)

	st, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "a.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entryText(st.Msg.GetEntry()), "a.txt FILE_TYPE_FILE "+home+"/a.txt 5 644 -rw-r--r-- user:user "+t0; got != want {
		t.Errorf("stat: %s, want %s", got, want)
	}
	if _, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("stat of a missing file: %v", err)
	}

	for _, tc := range []struct {
		depth uint32
		want  []string
	}{
		{0, []string{"a.txt", "d"}},
		{1, []string{"a.txt", "d"}},
		{2, []string{"a.txt", "d", "d/b.txt"}},
	} {
		ls, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "~", Depth: tc.depth}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, en := range ls.Msg.GetEntries() {
			got = append(got, strings.TrimPrefix(en.GetPath(), home+"/"))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("list to depth %d (-want +got):\n%s", tc.depth, diff)
		}
	}

	mk, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/tmp/x/y"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entryText(mk.Msg.GetEntry()), "y FILE_TYPE_DIRECTORY /tmp/x/y 0 755 drwxr-xr-x user:user "+t0; got != want {
		t.Errorf("make dir: %s, want %s", got, want)
	}
	for p, code := range map[string]connect.Code{"/tmp/x/y": connect.CodeAlreadyExists, "a.txt": connect.CodeInvalidArgument} {
		if _, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: p})); connect.CodeOf(err) != code {
			t.Errorf("make dir %s: %v, want %v", p, err, code)
		}
	}

	// A link to a directory: its target's type, its own mode string; a
	// listing of it lists the directory under the link's path.
	e.files.links["sba:"+home+"/ln"] = "d"
	st, err = c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "ln"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entryText(st.Msg.GetEntry())+" -> "+st.Msg.GetEntry().GetSymlinkTarget(),
		"ln FILE_TYPE_DIRECTORY "+home+"/ln 0 755 Lrwxrwxrwx user:user "+t0+" -> "+home+"/d"; got != want {
		t.Errorf("stat of a link: %s, want %s", got, want)
	}
	ls, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "ln"}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ls.Msg.GetEntries()); n != 1 || ls.Msg.GetEntries()[0].GetPath() != home+"/ln/b.txt" {
		t.Errorf("list of a link: %v", ls.Msg.GetEntries())
	}
	if _, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "a.txt"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("list of a file: %v", err)
	}
	delete(e.files.links, "sba:"+home+"/ln")

	mv, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "a.txt", Destination: "/srv/new/c.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := mv.Msg.GetEntry().GetPath(); got != "/srv/new/c.txt" || !e.files.dirs["sba:/srv/new"] {
		t.Errorf("move: %s, directories %v", got, e.files.dirs)
	}
	if _, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "a.txt", Destination: "new/deeper/z"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("move of a missing file: %v", err)
	}
	if e.files.dirs["sba:"+home+"/new"] {
		t.Error("a move of a missing file made its destination's directory")
	}

	for _, p := range []string{"d", "/no/such"} { // a directory with its files; a missing path is no error
		if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: p})); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
	}
	if _, ok := e.files.byPath["sba:"+home+"/d/b.txt"]; ok {
		t.Error("remove d left d/b.txt")
	}
	for _, tc := range []struct {
		path string
		code connect.Code
	}{
		{strings.Repeat("a", 300*1024), connect.CodeInvalidArgument}, // longer than a path can be
		{"/srv/../srv/new/c.txt", 0},                                 // ".." taken away, as envd does
	} {
		if _, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: tc.path})); connect.CodeOf(err) != tc.code && (err != nil || tc.code != 0) {
			t.Errorf("stat of %.40s: %v, want code %v", tc.path, err, tc.code)
		}
	}
	if _, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: strings.Repeat("a", maxFilesystemMessage)})); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("a message over the limit: %v, want resource_exhausted", err)
	}
	root := e.filesystemClient("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("root:")))
	if _, err := root.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/"})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("stat as root: %v", err)
	}
}

// TestWatchDir checks the WatchDir stream: start, the watch's changes as
// envd's events (with their entries when asked), keepalives, and the
// watch closed when the client goes away.
func TestWatchDir(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	home := service.HomeDir
	e.files.byPath["sba:"+home+"/d/a.txt"] = "aa"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := connect.NewRequest(&filesystem.WatchDirRequest{Path: "d", IncludeEntry: true})
	req.Header().Set(headerKeepalive, "1")
	stream, err := e.filesystemClient().WatchDir(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	next := func() string {
		t.Helper()
		if !stream.Receive() {
			t.Fatalf("the stream ended: %v", stream.Err())
		}
		switch ev := stream.Msg().GetEvent().(type) {
		case *filesystem.WatchDirResponse_Start:
			return "start"
		case *filesystem.WatchDirResponse_Keepalive:
			return "keepalive"
		case *filesystem.WatchDirResponse_Filesystem:
			fe := ev.Filesystem
			return fmt.Sprintf("%s %v entry=%s", fe.GetName(), fe.GetType(), fe.GetEntry().GetPath())
		}
		return "?"
	}
	if got := next(); got != "start" {
		t.Fatalf("first event %s, want start", got)
	}
	w := e.files.lastWatch()
	if w.root != home+"/d" {
		t.Errorf("watching %s, want %s/d", w.root, home)
	}
	for _, tc := range []struct {
		ev   service.FileEvent
		want string
	}{
		{service.FileEvent{Op: service.FileCreated, Name: "a.txt"}, "a.txt EVENT_TYPE_CREATE entry=" + home + "/d/a.txt"},
		{service.FileEvent{Op: service.FileWritten, Name: "a.txt"}, "a.txt EVENT_TYPE_WRITE entry=" + home + "/d/a.txt"},
		{service.FileEvent{Op: service.FileChmodded, Name: "gone"}, "gone EVENT_TYPE_CHMOD entry="}, // no entry to stat
		{service.FileEvent{Op: service.FileRenamed, Name: "a.txt"}, "a.txt EVENT_TYPE_RENAME entry="},
		{service.FileEvent{Op: service.FileRemoved, Name: "a.txt"}, "a.txt EVENT_TYPE_REMOVE entry="},
	} {
		w.events <- tc.ev
		if got := next(); got != tc.want {
			t.Errorf("event %s, want %s", got, tc.want)
		}
	}
	start := time.Now()
	if got := next(); got != "keepalive" || time.Since(start) < 900*time.Millisecond {
		t.Errorf("after a quiet second: %s after %s, want a keepalive", got, time.Since(start))
	}
	cancel()
	select {
	case <-w.closed:
	case <-time.After(5 * time.Second):
		t.Error("the watch was not closed when the client went away")
	}
	for p, code := range map[string]connect.Code{"nope": connect.CodeNotFound, "d/a.txt": connect.CodeInvalidArgument} {
		s, err := e.filesystemClient().WatchDir(context.Background(), connect.NewRequest(&filesystem.WatchDirRequest{Path: p}))
		if err == nil {
			s.Receive()
			err = s.Err()
		}
		if connect.CodeOf(err) != code {
			t.Errorf("watch %s: %v, want %v", p, err, code)
		}
	}
}

// TestWatchers checks CreateWatcher, GetWatcherEvents and RemoveWatcher:
// events kept until taken, the watch's failure after the events before
// it, other sandboxes' watchers, removal closing the watch, and idle
// watchers forgotten.
func TestWatchers(t *testing.T) {
	e := newEnv(t, running("sba", nil), running("sbb", nil))
	e.files.dirs["sba:/w"] = true
	c := e.filesystemClient()
	ctx := context.Background()
	create := func() (string, *fakeWatch) {
		t.Helper()
		res, err := c.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/w"}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetWatcherId(), e.files.lastWatch()
	}
	take := func(id string) ([]string, error) {
		res, err := c.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, ev := range res.Msg.GetEvents() {
			out = append(out, fmt.Sprintf("%s %v", ev.GetName(), ev.GetType()))
		}
		return out, nil
	}

	id, w := create()
	w.events <- service.FileEvent{Op: service.FileCreated, Name: "a"}
	w.events <- service.FileEvent{Op: service.FileRemoved, Name: "a"}
	var got []string
	waitFor(t, func() bool {
		evs, err := take(id)
		got = append(got, evs...)
		return err != nil || len(got) >= 2
	})
	if diff := cmp.Diff([]string{"a EVENT_TYPE_CREATE", "a EVENT_TYPE_REMOVE"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got, err := take(id); err != nil || len(got) != 0 {
		t.Errorf("take again: %v %v, want none", got, err)
	}
	other := filesystemconnect.NewFilesystemClient(e.envdClient("sbb"), e.srv.URL, connect.WithProtoJSON())
	if _, err := other.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("another sandbox's watcher: %v", err)
	}
	if _, err := c.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.closed:
	default:
		t.Error("RemoveWatcher did not close the watch")
	}
	if _, err := take(id); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("take after remove: %v", err)
	}
	if _, err := c.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("remove twice: %v", err)
	}

	// A watch that fails: its events, then its error, then nothing.
	id, w = create()
	w.events <- service.FileEvent{Op: service.FileCreated, Name: "b"}
	w.Close()
	var evs []string
	var err error
	waitFor(t, func() bool {
		var more []string
		more, err = take(id)
		evs = append(evs, more...)
		return err != nil
	})
	if !slices.Equal(evs, []string{"b EVENT_TYPE_CREATE"}) || connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("a failed watch: %v then %v, want [b] then unavailable", evs, err)
	}
	if _, err := take(id); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("take after the failure was said: %v, want an unknown watcher", err)
	}

	// An idle watcher is forgotten and its watch closed.
	ws := newWatchers()
	ws.idle = time.Millisecond
	fw := &fakeWatch{events: make(chan service.FileEvent), closed: make(chan struct{})}
	wid, err := ws.add("sba", fw, func(service.FileEvent) *filesystem.FilesystemEvent { return nil })
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := ws.take("sba", wid); return err != nil })
	<-fw.closed
}

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// TestWatchersGoroutines: a watcher holds one goroutine, its watch's
// reader, while it lives, none while it waits to expire, and none once
// removed or once its failed watch has said its error.
func TestWatchersGoroutines(t *testing.T) {
	const n = 50
	tests := []struct {
		name string
		end  func(t *testing.T, ws *watchers, id string, fw *fakeWatch) // nil: left live
		want int                                                        // goroutines held in all
	}{
		{name: "live", want: n},
		{name: "removed", want: 0, end: func(t *testing.T, ws *watchers, id string, _ *fakeWatch) {
			if err := ws.remove("sba", id); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "failed, error said", want: 0, end: func(t *testing.T, ws *watchers, id string, fw *fakeWatch) {
			fw.Close()
			waitFor(t, func() bool { _, err := ws.take("sba", id); return err != nil })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := newWatchers()
			before := runtime.NumGoroutine()
			var ids []string
			for range n {
				fw := &fakeWatch{events: make(chan service.FileEvent), closed: make(chan struct{})}
				id, err := ws.add("sba", fw, func(service.FileEvent) *filesystem.FilesystemEvent { return nil })
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
				if tt.end != nil {
					tt.end(t, ws, id, fw)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine()-before > tt.want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if held := runtime.NumGoroutine() - before; held > tt.want {
				t.Errorf("%d watchers hold %d goroutines, want %d", n, held, tt.want)
			}
			for _, id := range ids {
				_ = ws.remove("sba", id)
			}
		})
	}
}

// TestWatchersEventOutsideLock: turning a change into envd's event (which
// stats the file in the sandbox when asked for its entry) holds no lock
// of the daemon's watchers: while one watcher's stat waits, the others
// are created, read and removed.
func TestWatchersEventOutsideLock(t *testing.T) {
	ws := newWatchers()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := &fakeWatch{events: make(chan service.FileEvent), closed: make(chan struct{})}
	slowID, err := ws.add("sba", slow, func(service.FileEvent) *filesystem.FilesystemEvent {
		close(entered)
		<-release // a stat that waits for its sandbox
		return &filesystem.FilesystemEvent{Name: "a"}
	})
	if err != nil {
		t.Fatal(err)
	}
	slow.events <- service.FileEvent{Op: service.FileCreated, Name: "a"}
	<-entered
	tests := []struct {
		name string
		call func(id string) error
	}{
		{"take", func(id string) error { _, err := ws.take("sba", id); return err }},
		{"remove", func(id string) error { return ws.remove("sba", id) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				fw := &fakeWatch{events: make(chan service.FileEvent), closed: make(chan struct{})}
				id, err := ws.add("sba", fw, func(service.FileEvent) *filesystem.FilesystemEvent { return nil })
				if err == nil {
					err = tt.call(id)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("another watcher's calls wait for one watcher's event")
			}
		})
	}
	close(release)
	waitFor(t, func() bool {
		evs, err := ws.take("sba", slowID)
		return err == nil && len(evs) == 1 && evs[0].GetName() == "a"
	})
	if err := ws.remove("sba", slowID); err != nil {
		t.Fatal(err)
	}
}

// TestProcessSelectorRequired: a call that names no process (no pid, no
// tag) is invalid_argument whether or not the sandbox has processes (it
// was not_found in one with none).
func TestProcessSelectorRequired(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, c processconnect.ProcessClient) error
	}{
		{"SendInput", func(ctx context.Context, c processconnect.ProcessClient) error {
			_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Input: &process.ProcessInput{}}))
			return err
		}},
		{"SendSignal", func(ctx context.Context, c processconnect.ProcessClient) error {
			_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Signal: process.Signal_SIGNAL_SIGKILL}))
			return err
		}},
		{"CloseStdin", func(ctx context.Context, c processconnect.ProcessClient) error {
			_, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: &process.ProcessSelector{}}))
			return err
		}},
		{"Update", func(ctx context.Context, c processconnect.ProcessClient) error {
			_, err := c.Update(ctx, connect.NewRequest(&process.UpdateRequest{}))
			return err
		}},
		{"Connect", func(ctx context.Context, c processconnect.ProcessClient) error {
			stream, err := c.Connect(ctx, connect.NewRequest(&process.ConnectRequest{}))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
			}
			return stream.Err()
		}},
	}
	for _, withProcs := range []bool{false, true} {
		e := newEnv(t, running("sba", nil))
		if withProcs {
			e.procs.add(service.ProcDetail{Proc: service.Proc{ID: "proc-1", Running: true, Command: []string{"cat"}}, Pid: 10}, service.Proc{})
		}
		c := e.processClient()
		for _, tc := range calls {
			t.Run(fmt.Sprintf("%s, processes %t", tc.name, withProcs), func(t *testing.T) {
				if err := tc.call(t.Context(), c); connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Errorf("%v, want invalid_argument", err)
				}
			})
		}
	}
}
