package run

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// secretDir is a directory outside the tasks directory holding a file
// the daemon must never copy into a sandbox, and a valid task file.
func secretDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "keys"), "SECRET")
	write(t, filepath.Join(dir, "task.yaml"), namedTask("outside", "keys"))
	return dir
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// namedTask is a task file whose one input is source, copied to
// /workspace/in, which its check reads.
func namedTask(name, source string) string {
	return "name: " + name + "\nagent: custom\ngoal: g\nentrypoint: 'true'\n" +
		"inputs: [{source: '" + source + "', destination: /workspace/in}]\nend: {check: 'grep -rq A in'}\n"
}

// A named task's inputs, and its file, are in the tasks directory after
// every symbolic link: one leading out is refused at submission, naming
// the input, with nothing recorded; links that stay inside are followed.
func TestNamedTaskInputsStayInside(t *testing.T) {
	outside := secretDir(t)
	tasks := t.TempDir()
	write(t, filepath.Join(tasks, "real", "a.txt"), "A")
	symlink(t, outside, filepath.Join(tasks, "linkdir"))
	symlink(t, filepath.Join(outside, "keys"), filepath.Join(tasks, "keys.txt"))
	symlink(t, "../"+filepath.Base(outside)+"/keys", filepath.Join(tasks, "relkeys.txt"))
	symlink(t, filepath.Join(outside, "task.yaml"), filepath.Join(tasks, "evil.yaml"))
	symlink(t, "real", filepath.Join(tasks, "data"))
	symlink(t, "real/a.txt", filepath.Join(tasks, "one.txt"))
	for name, source := range map[string]string{
		"through-dir": "linkdir/keys", "file-link": "keys.txt", "relative-link": "relkeys.txt", "dotdot": "../" + filepath.Base(outside) + "/keys",
		"missing": "nothing", "dir-link-in": "data", "file-link-in": "one.txt", "through-dir-in": "data/a.txt",
	} {
		write(t, filepath.Join(tasks, name+".yaml"), namedTask(name, source))
	}
	e := newEnv(t, Config{TasksDir: tasks})

	refused := []struct{ name, want string }{
		{"through-dir", `inputs[0].source: "linkdir/keys"`},
		{"file-link", `inputs[0].source: "keys.txt"`},
		{"relative-link", `inputs[0].source: "relkeys.txt"`},
		{"dotdot", `inputs[0].source`},
		{"missing", `inputs[0].source: "nothing" is not in the task's directory`},
		{"evil", "task_name: read task file evil.yaml"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Submit(bg, api.RunSubmitRequest{TaskName: tt.name})
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("submit: %v, want ErrInvalidArgument naming %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the refusal shows the file: %v", err)
			}
		})
	}
	if list, err := e.svc.List(bg, ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Fatalf("refused submissions recorded runs: %+v, %v", list, err)
	}

	for _, name := range []string{"dir-link-in", "file-link-in", "through-dir-in"} {
		t.Run(name, func(t *testing.T) {
			b, err := e.svc.Submit(bg, api.RunSubmitRequest{TaskName: name})
			if err != nil {
				t.Fatalf("a link that stays inside: %v", err)
			}
			for _, r := range e.wait(t, b, 20*time.Second) {
				if r.Status != api.RunSucceeded {
					t.Errorf("%s: %s %s (want its input copied)", name, r.Status, r.Reason)
				}
			}
		})
	}
}

// The files a submission carried are checked the same way: an input the
// archive lacks is refused, naming it, and its files are gone.
func TestArchiveInputsChecked(t *testing.T) {
	e := newEnv(t, Config{})
	_, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: namedTask("t", "in/a.txt"), Inputs: tarGz(t, map[string]string{"other.txt": "A"})})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `inputs[0].source: "in/a.txt"`) {
		t.Errorf("submit: %v, want ErrInvalidArgument naming inputs[0].source", err)
	}
	if ents, _ := os.ReadDir(e.svc.batchesDir()); len(ents) != 0 {
		t.Errorf("a refused submission left files: %v", ents)
	}
}

// Inputs are opened through the directory again when they are copied: a
// link made between submission and run does not lead out of it.
func TestInputsOpenedInside(t *testing.T) {
	outside := secretDir(t)
	tasks := t.TempDir()
	write(t, filepath.Join(tasks, "in", "a.txt"), "A")
	write(t, filepath.Join(tasks, "swap.yaml"), namedTask("swap", "in/a.txt"))
	e := newEnv(t, Config{TasksDir: tasks})
	e.stop() // the submission waits in the queue
	b, err := e.svc.Submit(bg, api.RunSubmitRequest{TaskName: "swap"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tasks, "in")); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(tasks, "in"))
	write(t, filepath.Join(outside, "a.txt"), "A SECRET")
	e.start(t)
	r := e.wait(t, b, 20*time.Second)[0]
	if r.Status != api.RunFailed || !strings.Contains(r.Reason, "inputs[0]") || !strings.Contains(r.Reason, "path escapes") {
		t.Errorf("run: %s %q, want failed copying inputs[0] (the path escapes)", r.Status, r.Reason)
	}
}

// walkInput finds a source in its root whatever links it passes through,
// never outside it; in a directory's tree links are left out.
func TestWalkInput(t *testing.T) {
	outside := secretDir(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tree", "a.txt"), "A")
	write(t, filepath.Join(dir, "tree", "sub", "b.txt"), "B")
	symlink(t, filepath.Join(outside, "keys"), filepath.Join(dir, "tree", "keys"))
	symlink(t, outside, filepath.Join(dir, "tree", "out"))
	symlink(t, "a.txt", filepath.Join(dir, "tree", "in.txt"))
	symlink(t, outside, filepath.Join(dir, "linkdir"))
	symlink(t, filepath.Join(outside, "keys"), filepath.Join(dir, "keys.txt"))
	symlink(t, "tree", filepath.Join(dir, "treelink"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	walk := func(source string) (map[string]string, error) {
		got := map[string]string{}
		err := walkInput(root, source, func(rel string, mode fs.FileMode, r io.Reader) error {
			b, err := io.ReadAll(r)
			got[rel] = string(b)
			return err
		})
		return got, err
	}
	for _, source := range []string{"linkdir/keys", "linkdir", "keys.txt", "../" + filepath.Base(outside) + "/keys", "tree/../../" + filepath.Base(outside), "/etc/passwd"} {
		if got, err := walk(source); err == nil || len(got) > 0 {
			t.Errorf("%s: %v, %v; want refused, nothing read", source, got, err)
		}
	}
	want := map[string]string{"a.txt": "A", "sub/b.txt": "B"}
	for _, source := range []string{"tree", "treelink", "./tree/"} {
		got, err := walk(source)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", source, diff)
		}
	}
	if got, err := walk("treelink/in.txt"); err != nil || got["."] != "A" {
		t.Errorf("a link to a file inside: %v, %v", got, err)
	}
}

// An input archive whose entries conflict with each other is refused,
// naming the entry and never the host's directory, and leaves no files;
// entries that agree (a directory given twice, "./", files in a
// directory given after them) are unpacked.
func TestArchiveConflicts(t *testing.T) {
	e := newEnv(t, Config{})
	const dir, file = tar.TypeDir, tar.TypeReg
	tests := []struct {
		name    string
		entries []tarEntry
		want    string // "": accepted
	}{
		{"file then file under it", []tarEntry{{"a", file}, {"a/b", file}}, `inputs: "a/b" is under "a", a file earlier`},
		{"file then deeper file", []tarEntry{{"a", file}, {"a/b/c", file}}, `inputs: "a/b/c" is under "a"`},
		{"dir then file", []tarEntry{{"a", dir}, {"a", file}}, `inputs: "a" conflicts with a directory`},
		{"implied dir then file", []tarEntry{{"a/b", file}, {"a", file}}, `inputs: "a" conflicts with a directory`},
		{"file then dir", []tarEntry{{"a", file}, {"a/", dir}}, `inputs: "a/" conflicts with a file`},
		{"file twice", []tarEntry{{"a", file}, {"./a", file}}, `inputs: "./a" conflicts with a file`},
		{"dot file", []tarEntry{{".", file}}, `inputs: "." is the task's directory itself`},
		{"empty name", []tarEntry{{"", file}}, `inputs: "" is the task's directory itself`},
		{"agreeing", []tarEntry{{"./", dir}, {"a/b", file}, {"a/", dir}, {"a/c", file}, {"a", dir}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: "name: t\nagent: custom\ngoal: g\nentrypoint: 'true'\n", Inputs: tarOf(t, tt.entries)})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("submit: %v", err)
			case tt.want == "":
				return
			case !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want):
				t.Errorf("submit: %v, want ErrInvalidArgument naming %q", err, tt.want)
			case strings.Contains(err.Error(), e.svc.cfg.Dir):
				t.Errorf("submit: %v names the host's directory", err)
			}
			if ents, _ := os.ReadDir(e.svc.batchesDir()); len(ents) != 0 {
				t.Errorf("a refused submission left files: %v", ents)
			}
		})
	}
}

// TestArchiveEntries: an input archive of more entries than
// MaxInputsEntries is refused, leaving no files, however few bytes they
// are. (A 64 MiB archive of empty directories made over a million on the
// daemon's disk, and as many uploads into every run's sandbox.)
func TestArchiveEntries(t *testing.T) {
	defer func(n int) { maxInputsEntries = n }(maxInputsEntries)
	maxInputsEntries = 10 // for speed: the test makes as many directories
	e := newEnv(t, Config{})
	task := "name: t\nagent: custom\ngoal: g\nentrypoint: 'true'\n"
	for _, tc := range []struct {
		n    int
		want string // "": accepted
	}{
		{10, ""},
		{11, "more than 10 entries"},
	} {
		entries := make([]tarEntry, tc.n)
		for i := range entries {
			entries[i] = tarEntry{fmt.Sprintf("d%d/", i), tar.TypeDir}
		}
		_, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: task, Inputs: tarOf(t, entries)})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d entries: %v", tc.n, err)
		case tc.want != "" && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d entries: %v, want ErrInvalidArgument saying %q", tc.n, err, tc.want)
		case tc.want != "":
			if ents, _ := os.ReadDir(e.svc.batchesDir()); len(ents) > 1 { // the accepted one's
				t.Errorf("a refused submission left files: %v", ents)
			}
		}
	}
}

// tarEntry is an entry of an archive tarOf makes.
type tarEntry struct {
	name string
	typ  byte
}

// tarOf is the base64 of a gzipped tar of entries, in order, each file
// holding "x".
func tarOf(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, en := range entries {
		h := &tar.Header{Name: en.name, Mode: 0o755, Typeflag: en.typ}
		if en.typ == tar.TypeReg {
			h.Mode, h.Size = 0o644, 1
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if en.typ == tar.TypeReg {
			tw.Write([]byte("x"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
