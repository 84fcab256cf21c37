package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra/doc"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli from the command tree (make docs)")

// TestCLIReference fails when docs/cli, the command reference generated
// from the command tree, is out of date; "make docs" regenerates it.
func TestCLIReference(t *testing.T) {
	dir := t.TempDir()
	root := newRoot(env{stdout: io.Discard, stderr: io.Discard})
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join("..", "..", "docs", "cli")
	want := readDir(t, dir)
	if *updateDocs {
		os.RemoveAll(docs)
		if err := os.MkdirAll(docs, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(docs, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	got := readDir(t, docs)
	if len(want) < 30 {
		t.Fatalf("the command tree makes only %d pages", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/cli is out of date; run make docs (-generated +docs/cli):\n%s", diff)
	}
}

// readDir returns the Markdown files of dir by name.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}
