package repotest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the server's module path.
const module = "github.com/agent2env/agent2env"

// surfaces are the packages that speak a protocol to clients (see
// internal/service's package doc). Every new surface is added here.
var surfaces = []string{
	"internal/httpapi",
	"internal/mcpserver",
	"internal/gateway",
	"internal/opensandbox",
	"internal/e2b",
}

// surfaceImports are the only packages of this module a surface may import
// (a path allows its subpackages too): the wire types, the service layer,
// the edge's helpers, other surfaces (one mounts another), and the domain
// packages whose one exported service speaks the api wire types and owns
// its rules. It mirrors the list in internal/service's package doc.
var surfaceImports = append([]string{
	"api",
	"internal/service",
	"internal/errdefs",
	"internal/auth",
	"internal/metrics",
	"internal/buildinfo",
	"internal/jsonbody",
	"internal/utf8cut",
	"internal/llm/caller",
	// Domain services that speak api already.
	"internal/template", // template.Service
	"internal/prepull",  // prepull.Service
	"internal/session",  // session.Service
	"internal/run",      // run.Service
	"internal/task",     // decoding task files (their size limit)
	"internal/llm/gate", // the LLM proxy's own surface and its keys
}, surfaces...)

// runnerForbidden are the packages the task runner (internal/run) may not
// import (a path forbids its subpackages too): it drives sandboxes through
// service.Sandboxes like a surface. It keeps its own records in the store
// (store.Runs), so internal/store itself is not forbidden, but its
// backends are.
var runnerForbidden = append([]string{
	"internal/manager",
	"internal/store/",
	"internal/sandbox",
	"internal/runtime",
	"internal/agent",
	"internal/image",
	"internal/pool",
	"internal/contexts",
	"internal/llm/archive",
	"internal/netproxy",
	"internal/netguard",
	"internal/daemon",
}, surfaces...)

// serviceForbidden are the packages internal/service may not import: it
// sits under the surfaces and the runner, which call it.
var serviceForbidden = append([]string{"internal/run", "internal/daemon"}, surfaces...)

// TestLayers fails, naming the package and the import, when a surface
// imports a package of this module off surfaceImports, the task runner one
// on runnerForbidden, or the service layer one on serviceForbidden. Every
// non-test Go file counts, whatever its build tags.
func TestLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range surfaces {
		for _, u := range moduleImports(t, root, pkg) {
			if !under(u.imp, surfaceImports) {
				t.Errorf("surface %s imports %s (%s): a surface imports only api, internal/service and the packages internal/service's doc allows", pkg, u.imp, u.file)
			}
		}
	}
	for _, u := range moduleImports(t, root, "internal/run") {
		if under(u.imp, runnerForbidden) {
			t.Errorf("the task runner internal/run imports %s (%s): it uses sandboxes through internal/service", u.imp, u.file)
		}
	}
	for _, u := range moduleImports(t, root, "internal/service") {
		if under(u.imp, serviceForbidden) {
			t.Errorf("internal/service imports %s (%s): the surfaces and the runner call the service layer, not the other way", u.imp, u.file)
		}
	}
}

// under reports whether package p is one of list or below one ("x/"
// entries match only below x).
func under(p string, list []string) bool {
	return slices.ContainsFunc(list, func(l string) bool {
		return p == l || strings.HasPrefix(p, strings.TrimSuffix(l, "/")+"/")
	})
}

// use is an import of this module's package imp ("internal/service") in
// file.
type use struct{ file, imp string }

// moduleImports returns the imports of this module in the non-test Go
// files of pkg and of its subpackages.
func moduleImports(t *testing.T, root, pkg string) []use {
	t.Helper()
	var uses []use
	files := 0
	err := filepath.WalkDir(filepath.Join(root, pkg), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if p, ok := strings.CutPrefix(imp, module+"/"); ok {
				uses = append(uses, use{rel, p})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the imports of %s: %v", pkg, err)
	}
	if files == 0 {
		t.Fatalf("%s has no Go files: the table names a package that is gone", pkg)
	}
	return uses
}
