package run

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/service"
)

func TestExpand(t *testing.T) {
	e := newEnv(t, Config{})
	sb, err := e.M.Create(bg, manager.CreateRequest{Image: "agent2env/agent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a.py", "b.txt", "src/c.py", "src/deep/d.py", "src/deep/e.txt", "docs/f.md"} {
		if _, err := e.M.Upload(bg, sb.ID, "/workspace/"+p, 0o644, strings.NewReader(p)); err != nil {
			t.Fatal(err)
		}
	}
	sf := sandboxFiles{service.NewSandboxes(e.M, ""), sb.ID}
	for _, tt := range []struct {
		patterns  []string
		want      []string
		unmatched []string
	}{
		{[]string{"/workspace/a.py"}, []string{"/workspace/a.py"}, nil},
		{[]string{"/workspace/missing.py", "/workspace/a.py"}, []string{"/workspace/a.py"}, []string{"/workspace/missing.py"}},
		{[]string{"/workspace/src"}, []string{"/workspace/src/c.py", "/workspace/src/deep/d.py", "/workspace/src/deep/e.txt"}, nil}, // as src/**
		{[]string{"/workspace/*.py"}, []string{"/workspace/a.py"}, nil},
		{[]string{"/workspace/**/*.py"}, []string{"/workspace/a.py", "/workspace/src/c.py", "/workspace/src/deep/d.py"}, nil},
		{[]string{"/workspace/src/**"}, []string{"/workspace/src/c.py", "/workspace/src/deep/d.py", "/workspace/src/deep/e.txt"}, nil},
		{[]string{"/workspace/*/deep/*.txt", "/workspace/**/e.txt"}, []string{"/workspace/src/deep/e.txt"}, nil},
		{[]string{"/workspace/[ab].*"}, []string{"/workspace/a.py", "/workspace/b.txt"}, nil},
		{[]string{"/workspace/*.go", "/workspace/docs/f.md", "/nowhere/**"}, []string{"/workspace/docs/f.md"}, []string{"/workspace/*.go", "/nowhere/**"}},
	} {
		files, unmatched, err := expand(bg, sf, tt.patterns)
		if err != nil {
			t.Errorf("%v: %v", tt.patterns, err)
		}
		got := []string{}
		for _, f := range files {
			got = append(got, f.Path)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.patterns, diff)
		}
		if diff := cmp.Diff(tt.unmatched, unmatched); diff != "" {
			t.Errorf("%v: unmatched (-want +got):\n%s", tt.patterns, diff)
		}
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := newLineWriter(func(l []byte) { got = append(got, string(l)) })
	for _, chunk := range []string{"a", "b\nc\r\n", "\n", strings.Repeat("x", maxLine+3)} {
		w.Write([]byte(chunk))
	}
	w.Close()
	want := []string{"ab", "c", "", strings.Repeat("x", maxLine), "xxx"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
