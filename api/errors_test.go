package api

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCodeTable checks that every Code constant of the package has a
// status and a class, and that a class's code is its own class.
func TestCodeTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			vs, ok := node.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				code, _ := strconv.Unquote(lit.Value)
				n++
				class := CodeClass(code)
				if CodeStatus(code) == 0 || class == "" {
					t.Errorf("%s (%s) has no status or class", id.Name, code)
				}
				if CodeClass(class) != class {
					t.Errorf("%s: class %s is not a class of its own", id.Name, class)
				}
			}
			return true
		})
	}
	if n != len(codes) {
		t.Errorf("%d Code constants, %d codes in the table", n, len(codes))
	}
	if CodeStatus("NO_SUCH_CODE") != 0 || CodeClass("NO_SUCH_CODE") != "" {
		t.Error("an unknown code has a status or class")
	}
}

func TestErrorJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Error
	}{
		{"plain", `{"error":"x","code":"NOT_FOUND"}`, Error{Message: "x", Code: "NOT_FOUND"}},
		{"details", `{"error":"x","code":"RESOURCE_LIMIT","used":3,"why":{"a":"b"}}`,
			Error{Message: "x", Code: "RESOURCE_LIMIT", Details: map[string]any{"used": 3.0, "why": map[string]any{"a": "b"}}}},
		{"field names in any case, as encoding/json matches them", `{"Error":"x","CODE":"C"}`, Error{Message: "x", Code: "C"}},
		{"no code", `{"error":"x"}`, Error{Message: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Error
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Error (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{`[]`, `"x"`, `{"error":1}`, `{"error":"x","code":2}`, `{`} {
		var e Error
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("Unmarshal(%s) = nil, want an error", bad)
		}
	}
	b, err := json.Marshal(&Error{Message: "m", Code: "C", Details: map[string]any{"b": 1, "a": []int{2}, "code": "no"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":"m","code":"C","a":[2],"b":1}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
}

// TestResourceErrorJSON: a ResourceError round-trips with its usage and
// suggestion (Error's promoted methods alone would drop them).
func TestResourceErrorJSON(t *testing.T) {
	want := ResourceError{
		Error:      Error{Message: "no room", Code: CodeInsufficientCapacity, Details: map[string]any{"extra": "x"}},
		Usage:      Usage{Sandboxes: 2, MaxSandboxes: 3, MilliCPU: 1500, MilliCPUCapacity: 2000, MemoryBytes: 1 << 30, MemoryBytesCapacity: 4 << 30},
		Suggestion: "delete idle sessions",
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	const body = `{"error":"no room","code":"INSUFFICIENT_CAPACITY","extra":"x","suggestion":"delete idle sessions",` +
		`"usage":{"sandboxes":2,"max_sandboxes":3,"sessions":0,"idle_sessions":0,"millicpu":1500,"millicpu_capacity":2000,"memory_bytes":1073741824,"memory_bytes_capacity":4294967296}}`
	if string(b) != body {
		t.Errorf("marshaled\n%s\nwant\n%s", b, body)
	}
	var got ResourceError
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
