package repotest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackagesHaveDocComments fails for every Go package in the repository
// (both modules) none of whose non-test files carries a package doc comment.
func TestPackagesHaveDocComments(t *testing.T) {
	root := filepath.Join("..", "..")
	documented := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "node_modules", "sdk":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		documented[dir] = documented[dir] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(documented) < 10 {
		t.Fatalf("found only %d packages under %s: the walk is broken", len(documented), root)
	}
	for dir, ok := range documented {
		if !ok {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("package %s has no doc comment", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "docs", "ARCHITECTURE.md")); err != nil {
		t.Errorf("docs/ARCHITECTURE.md: %v", err)
	}
}
