package repotest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPath matches a path under docs/ as code and prose cite it: not part
// of a longer path or URL, "../" prefixes allowed (markdown links).
var docPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:\.\./)*docs/[A-Za-z0-9_./-]*[A-Za-z0-9_-])`)

// notCitations are paths under docs/ that name no file of this
// repository, by the file they appear in, and why.
var notCitations = map[[2]string]string{
	{"docs/liteboxd-wire.md", "network-access-guide.md"}: "LiteBoxd's own guide, which the page compares against",
	{"internal/run/artifacts_test.go", "f.md"}:           "a file the test makes in a sandbox's workdir",
}

// TestDocPathsExist fails for every docs/… path cited in Go code and
// tests, shell scripts, the Makefile, CI's entry point and markdown that
// is not a file or directory of the repository: a citation of a page
// nobody can read is no evidence.
func TestDocPathsExist(t *testing.T) {
	root := filepath.Join("..", "..")
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".venv", ".cache", "testdata", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !citing(rel) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			for _, m := range docPath.FindAllStringSubmatch(sc.Text(), -1) {
				cite := strings.TrimLeft(m[1], "./") // a link from a page below the root: ../docs/…
				cited++
				if _, ok := notCitations[[2]string{rel, strings.TrimPrefix(cite, "docs/")}]; ok {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(cite))); err != nil {
					t.Errorf("%s:%d cites %s, which is not in the repository", rel, n, cite)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 10 {
		t.Fatalf("found only %d docs/ paths under %s: the walk is broken", cited, root)
	}
}

// citing reports whether the file at rel (slash-separated, from the root)
// is one whose docs/ paths are checked.
func citing(rel string) bool {
	switch {
	case strings.HasSuffix(rel, ".go"), strings.HasSuffix(rel, ".sh"), strings.HasSuffix(rel, ".md"):
		return true
	case rel == "Makefile", rel == ".ci/run":
		return true
	}
	return false
}
