package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/mcpserver"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/prepull/prepulltest"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
	"github.com/agent2env/agent2env/internal/store/sqlite"
	"github.com/agent2env/agent2env/internal/template"
)

// These tests hold the server to api/openapi.yaml, the source of truth of
// the wire contract (SPEC C3): the document is valid OpenAPI, its schemas
// match the Go wire types, it lists exactly the routes the server
// registers, and every response of a scripted session conforms to it.

// sseMediaType is the media type of the streamed responses. The document
// gives their schema as a string and names the schema of each event's
// data in the extension x-sse-events.
const sseMediaType = "text/event-stream"

func init() {
	// Request and response bodies of this type are read as text; the events
	// are checked by checkEvents.
	openapi3filter.RegisterBodyDecoder(sseMediaType, openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/x-yaml", yamlBodyDecoder)
	// JSON Lines (the LLM export) are text; TestLLMExportAndConversations
	// reads each line.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.FileBodyDecoder)
}

// yamlBodyDecoder reads a YAML body as the JSON value it stands for: kin's
// own decoder keeps timestamps as time.Time, which schemas cannot check.
func yamlBodyDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	var v any
	if err := yaml.NewDecoder(body).Decode(&v); err != nil {
		return nil, &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Cause: err}
	}
	return jsonValue(v), nil
}

// jsonValue turns a decoded YAML value into what encoding/json would
// decode: times become RFC 3339 strings, integers float64.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = jsonValue(x)
		}
	case []any:
		for i, x := range v {
			v[i] = jsonValue(x)
		}
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case int:
		return float64(v)
	}
	return v
}

// loadOpenAPI parses and validates api.OpenAPI. Each call returns a fresh
// document, which the caller may change.
func loadOpenAPI(tb testing.TB) *openapi3.T {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		tb.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		tb.Fatalf("api/openapi.yaml is not valid OpenAPI: %v", err)
	}
	return doc
}

// closeSchemas sets additionalProperties: false on every object schema of
// doc that lists properties and says nothing about others, so that a
// field the document does not know fails validation. The document itself
// leaves objects open, for clients' forward compatibility.
func closeSchemas(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties.Has = new(bool)
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		walk(s.Not)
		for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, r := range refs {
				walk(r)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				walk(p.Value.Schema)
			}
			if op.RequestBody != nil {
				for _, mt := range op.RequestBody.Value.Content {
					walk(mt.Schema)
				}
			}
			for _, r := range op.Responses.Map() {
				for _, mt := range r.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
}

// operations returns the document's operations by "METHOD path".
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

func TestOpenAPIValid(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3", doc.OpenAPI)
	}
	exempt := map[string]bool{"GET /health": true, "GET /api/v1/health": true, "GET /readyz": true}
	for key, op := range operations(doc) {
		if op.OperationID == "" || op.Summary == "" || len(op.Tags) == 0 {
			t.Errorf("%s: needs an operationId, a summary and a tag", key)
		}
		path := strings.SplitN(key, " ", 2)[1]
		switch {
		case exempt[key]:
			if op.Security == nil || len(*op.Security) != 0 {
				t.Errorf("%s: the probes are served without an API key: want security []", key)
			}
		case strings.HasPrefix(path, gatewayPrefix):
			// A CORS preflight needs no token.
			n := 1
			if strings.HasPrefix(key, "OPTIONS ") {
				n = 2
			}
			if op.Security == nil || len(*op.Security) != n || (*op.Security)[0]["accessToken"] == nil {
				t.Errorf("%s: the gateway takes the sandbox's access token: want security [accessToken]", key)
			}
		default:
			if op.Security != nil {
				t.Errorf("%s: API operations use the global bearerAuth", key)
			}
			if op.Responses.Status(http.StatusUnauthorized) == nil {
				t.Errorf("%s: needs a 401 response", key)
			}
			if op.Responses.Default() == nil {
				t.Errorf("%s: needs a default (error) response", key)
			}
		}
		// A body is refused malformed (400), too large (413) or in a
		// media type the operation does not take (415, requireMediaTypes),
		// before the operation runs.
		if op.RequestBody != nil && op.RequestBody.Value.Content.Get("*/*") == nil {
			for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType} {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s: takes a request body, which may be refused with %d: document it", key, status)
				}
			}
		}
		// Every error status of an API operation has the error body.
		for code, r := range op.Responses.Map() {
			status, err := strconv.Atoi(code)
			if strings.HasPrefix(path, gatewayPrefix) && code == "default" || err == nil && status < 400 {
				continue
			}
			if path == mcpPath && code != "default" && r.Ref == "#/components/responses/MCPTransportError" {
				continue // the MCP transport's own refusals are plain text
			}
			mt := r.Value.Content.Get("application/json")
			if len(r.Value.Content) != 1 || mt == nil || (mt.Schema.Ref != "#/components/schemas/Error" &&
				!(mt.Schema.Ref == "#/components/schemas/ResourceError" && (status == 429 || status == 507)) &&
				!(r.Ref == "#/components/responses/Conflict" && status == 409)) {
				t.Errorf("%s: response %s must be the Error body (ResourceError for 429 and 507, Conflict's for 409), alone", key, code)
			}
		}
	}
}

// TestOpenAPIErrorCodes checks that the document's ErrorCode enum lists
// exactly the Code constants of package api.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		documented = append(documented, v.(string))
	}
	fset := token.NewFileSet()
	var codes []string
	for _, f := range parseDir(t, fset, filepath.Join("..", "..", "api")) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: %s is not a string literal", fset.Position(vs.Pos()), name.Name)
					continue
				}
				s, _ := strconv.Unquote(lit.Value)
				codes = append(codes, s)
			}
			return true
		})
	}
	slices.Sort(documented)
	slices.Sort(codes)
	if diff := cmp.Diff(codes, documented); diff != "" {
		t.Errorf("ErrorCode enum (-api constants +document):\n%s", diff)
	}
}

// parseDir parses the non-test Go files of dir.
func parseDir(tb testing.TB, fset *token.FileSet, dir string) []*ast.File {
	tb.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		tb.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestOpenAPISchemas checks the document's schemas against the Go wire
// types field by field: the same JSON names, compatible types, and every
// field that is always sent (no omitempty) required in response schemas.
// Every struct type of package api must have its schema.
func TestOpenAPISchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	const (
		out  = "response" // sent by the server: omitempty decides required
		in   = "request"  // sent by clients: required is the server's rule
		both = "both"
	)
	tests := []struct {
		schema string
		v      any
		dir    string
	}{
		{"Error", api.Error{}, out},
		{"Version", api.Version{}, out},
		{"Capabilities", api.Capabilities{}, out},
		{"Sandbox", api.Sandbox{}, out},
		{"SandboxList", api.SandboxList{}, out},
		{"SandboxOverrides", api.SandboxOverrides{}, in},
		{"CreateSandboxRequest", api.CreateSandboxRequest{}, in},
		{"CreateSnapshotRequest", api.CreateSnapshotRequest{}, in},
		{"Snapshot", api.Snapshot{}, out},
		{"SnapshotList", api.SnapshotList{}, out},
		{"ForkRequest", api.ForkRequest{}, in},
		{"ForkedSandbox", api.ForkedSandbox{}, out},
		{"ForkResponse", api.ForkResponse{}, out},
		{"ExecRequest", api.ExecRequest{}, in},
		{"ExecResponse", api.ExecResponse{}, out},
		{"ExecEvent", api.ExecEvent{}, out},
		{"TerminalRequest", api.TerminalRequest{}, in},
		{"TerminalExit", api.TerminalExit{}, out},
		{"TerminalTicket", api.TerminalTicket{}, out},
		{"CreateTerminalRequest", api.CreateTerminalRequest{}, in},
		{"TerminalInfo", api.TerminalInfo{}, out},
		{"TerminalList", api.TerminalList{}, out},
		{"FileInfoList", api.List[api.FileInfo]{}, out},
		{"LogsResponse", api.LogsResponse{}, out},
		{"FileInfo", api.FileInfo{}, out},
		{"Image", api.Image{}, out},
		{"ImageList", api.List[api.Image]{}, out},
		{"ImageRequest", api.ImageRequest{}, in},
		{"ImageProgress", api.ImageProgress{}, out},
		{"ResourceSpec", api.ResourceSpec{}, both},
		{"FileSpec", api.FileSpec{}, both},
		{"ExecAction", api.ExecAction{}, both},
		{"ProbeSpec", api.ProbeSpec{}, both},
		{"NetworkSpec", api.NetworkSpec{}, both},
		{"PersistenceSpec", api.PersistenceSpec{}, both},
		{"TemplateSpecInput", api.TemplateSpec{}, in},
		{"TemplateSpec", api.TemplateSpec{}, out},
		{"Template", api.Template{}, out},
		{"TemplateVersion", api.TemplateVersion{}, out},
		{"CreateTemplateRequest", api.CreateTemplateRequest{}, in},
		{"UpdateTemplateRequest", api.UpdateTemplateRequest{}, in},
		{"RollbackRequest", api.RollbackRequest{}, in},
		{"RollbackResponse", api.RollbackResponse{}, out},
		{"TemplateList", api.TemplateList{}, out},
		{"VersionList", api.VersionList{}, out},
		{"ImportResultItem", api.ImportResultItem{}, out},
		{"ImportResult", api.ImportResult{}, out},
		{"PrepullProgress", api.PrepullProgress{}, out},
		{"PrepullTask", api.PrepullTask{}, out},
		{"PrepullList", api.PrepullList{}, out},
		{"PrepullRequest", api.PrepullRequest{}, in},
		{"CreateContextRequest", api.CreateContextRequest{}, in},
		{"Context", api.Context{}, out},
		{"ContextList", api.ContextList{}, out},
		{"DeleteContextResponse", api.DeleteContextResponse{}, out},
		{"ExecuteRequest", api.ExecuteRequest{}, in},
		{"ExecuteResponse", api.ExecuteResponse{}, out},
		{"ExecutionOutput", api.ExecutionOutput{}, out},
		{"ExecutionResult", api.ExecutionResult{}, out},
		{"ExecutionError", api.ExecutionError{}, out},
		{"ExecutionOutputEvent", api.ExecutionOutputEvent{}, out},
		{"SessionExecuteRequest", api.SessionExecuteRequest{}, in},
		{"SessionInfo", api.SessionInfo{}, out},
		{"SessionExecuteResponse", api.SessionExecuteResponse{}, out},
		{"CommandLine", api.CommandLine{}, in},
		{"SessionCommandRequest", api.SessionCommandRequest{}, in},
		{"SessionCommandResponse", api.SessionCommandResponse{}, out},
		{"Session", api.Session{}, out},
		{"SessionList", api.SessionList{}, out},
		{"LLMKeyRequest", api.LLMKeyRequest{}, in},
		{"LLMKey", api.LLMKey{}, out},
		{"LLMKeyList", api.LLMKeyList{}, out},
		{"DeleteSessionResponse", api.DeleteSessionResponse{}, out},
		{"KeepAliveRequest", api.KeepAliveRequest{}, in},
		{"Usage", api.Usage{}, out},
		{"ResourceError", api.ResourceError{}, out},
		{"Stats", api.Stats{}, out},
		{"SessionStats", api.SessionStats{}, out},
		{"ResourceStats", api.ResourceStats{}, out},
		{"ExecutionStats", api.ExecutionStats{}, out},
		{"WarmPool", api.WarmPool{}, out},
		{"LLMUsage", api.LLMUsage{}, out},
		{"LLMExchange", api.LLMExchange{}, out},
		{"LLMExchangeList", api.LLMExchangeList{}, out},
		{"LLMChunk", api.LLMChunk{}, out},
		{"LLMMessage", api.LLMMessage{}, out},
		{"LLMExchangeDetail", api.LLMExchangeDetail{}, out},
		{"LLMConversation", api.LLMConversation{}, out},
		{"LLMConversationList", api.LLMConversationList{}, out},
		{"RunSubmitRequest", api.RunSubmitRequest{}, in},
		{"RunBatch", api.RunBatch{}, out},
		{"Run", api.Run{}, out},
		{"RunLLMUsage", api.RunLLMUsage{}, out},
		{"RunArtifact", api.RunArtifact{}, out},
		{"RunList", api.RunList{}, out},
		{"RunEvent", api.RunEvent{}, out},
	}
	// Properties no field has, which MarshalJSON writes (always), by schema:
	// a sandbox's state (api/sandboxjson.go).
	marshaled := map[string][]string{"Sandbox": {"state"}, "ForkedSandbox": {"state"}}
	// Schemas of things that are no Go struct of package api.
	noGoType := map[string]bool{
		"ErrorCode": true, "Message": true, "Env": true, "SandboxMetadata": true, "SandboxStatus": true, "LiteBoxdStatus": true, "ImageStatus": true, "ImportStrategy": true,
		"ImportForm": true, "ImportURLEncodedForm": true, "UploadForm": true, "TemplateMetadata": true, "TemplateDocument": true, "TemplateDocumentList": true,
		"PrepullStatus": true, "RunStatus": true, "NotReadyError": true, "ExecuteStreamError": true, "ExecReason": true, "ExecOOMKilled": true, "OutputEncoding": true, "OutputMark": true,
		"JSONRPCMessage": true, // the MCP specification's; package mcpserver speaks it through the MCP SDK
	}
	covered := map[string]bool{}
	goTypes := map[string]bool{}
	for _, tc := range tests {
		covered[tc.schema] = true
		name := reflect.TypeOf(tc.v).Name()
		goTypes[name[:strings.IndexAny(name+"[", "[")]] = true
		t.Run(tc.schema, func(t *testing.T) {
			ref := doc.Components.Schemas[tc.schema]
			if ref == nil {
				t.Fatalf("no schema %s", tc.schema)
			}
			props, required := flatten(ref.Value)
			var fields []string
			for _, f := range reflect.VisibleFields(reflect.TypeOf(tc.v)) {
				tag := f.Tag.Get("json")
				if f.Anonymous && tag == "" {
					continue // embedded: its fields are visible here
				}
				name, opts, _ := strings.Cut(tag, ",")
				if name == "-" || !f.IsExported() {
					continue
				}
				fields = append(fields, name)
				p := props[name]
				if p == nil {
					continue // reported below
				}
				if err := compatible(f.Type, p.Value); err != nil {
					t.Errorf("%s.%s: %v", tc.schema, name, err)
				}
				omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
				if tc.dir == out && !omitempty && !slices.Contains(required, name) {
					t.Errorf("%s.%s is always sent: the schema must require it", tc.schema, name)
				}
			}
			for _, name := range marshaled[tc.schema] {
				fields = append(fields, name)
				if !slices.Contains(required, name) {
					t.Errorf("%s.%s is always sent: the schema must require it", tc.schema, name)
				}
			}
			slices.Sort(fields)
			if diff := cmp.Diff(fields, slices.Sorted(maps.Keys(props))); diff != "" {
				t.Errorf("properties (-Go +document):\n%s", diff)
			}
			for _, r := range required {
				if props[r] == nil {
					t.Errorf("%s requires %s, which it does not define", tc.schema, r)
				}
			}
		})
	}
	for name := range doc.Components.Schemas {
		if !covered[name] && !noGoType[name] {
			t.Errorf("schema %s is checked against no Go type: add it to this test", name)
		}
	}
	fset := token.NewFileSet()
	for _, f := range parseDir(t, fset, filepath.Join("..", "..", "api")) {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() && !goTypes[ts.Name.Name] {
					t.Errorf("wire type api.%s has no schema in api/openapi.yaml (or is not checked here)", ts.Name.Name)
				}
			}
		}
	}
}

// flatten returns the properties and required names of s, merging allOf.
func flatten(s *openapi3.Schema) (map[string]*openapi3.SchemaRef, []string) {
	props := maps.Clone(s.Properties)
	if props == nil {
		props = map[string]*openapi3.SchemaRef{}
	}
	required := slices.Clone(s.Required)
	for _, sub := range s.AllOf {
		p, r := flatten(sub.Value)
		maps.Copy(props, p)
		required = append(required, r...)
	}
	return props, required
}

// schemaType is the type of s, looking into allOf.
func schemaType(s *openapi3.Schema) string {
	if s.Type != nil && len(*s.Type) == 1 {
		return (*s.Type)[0]
	}
	for _, sub := range s.AllOf {
		if t := schemaType(sub.Value); t != "" {
			return t
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return ""
}

var timeType = reflect.TypeFor[time.Time]()

// compatible reports whether values of the Go type t encode as JSON that
// the schema s describes (in type, not in value).
var marshalerType = reflect.TypeFor[json.Marshaler]()

func compatible(t reflect.Type, s *openapi3.Schema) error {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	got := schemaType(s)
	var want string
	switch {
	case t.Implements(marshalerType):
		return nil // its own JSON (api.CommandLine: a string or an array)
	case t == timeType:
		if got != "string" || s.Format != "date-time" {
			return fmt.Errorf("a time: want type string, format date-time; have %s %s", got, s.Format)
		}
		return nil
	case t.Kind() == reflect.String:
		want = "string"
	case t.Kind() == reflect.Bool:
		want = "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		want = "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		want = "number"
	case t.Kind() == reflect.Slice:
		if got != "array" {
			return fmt.Errorf("Go %s: want type array, have %q", t, got)
		}
		return compatible(t.Elem(), s.Items.Value)
	case t.Kind() == reflect.Map:
		if got != "object" || s.AdditionalProperties.Schema == nil {
			return fmt.Errorf("Go %s: want an object with additionalProperties, have %q", t, got)
		}
		return compatible(t.Elem(), s.AdditionalProperties.Schema.Value)
	case t.Kind() == reflect.Struct:
		want = "object"
	case t.Kind() == reflect.Interface:
		if got != "" {
			return fmt.Errorf("Go %s: any JSON value; want no type, have %q", t, got)
		}
		return nil
	default:
		return fmt.Errorf("Go %s: no JSON type known", t)
	}
	if got != want {
		return fmt.Errorf("Go %s: want type %s, have %q", t, want, got)
	}
	return nil
}

// muxCapture is a route group that registers nothing but keeps the mux the
// server registers its routes on, so that a test can ask the real mux
// which pattern serves a request.
type muxCapture struct{ mux *http.ServeMux }

func (c *muxCapture) Register(mux *http.ServeMux) { c.mux = mux }

// route is a (method, document path) pair; method "*" stands for a
// pattern without a method, which serves them all.
type route struct{ method, path string }

func (r route) String() string { return r.method + " " + r.path }

// parsePattern turns a ServeMux pattern into a route: "{x...}" becomes
// the document's "{x}".
func parsePattern(pattern string) route {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "*", pattern
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "...}") {
			segs[i] = strings.TrimSuffix(s, "...}") + "}"
		}
	}
	return route{method, strings.Join(segs, "/")}
}

// sourceRoutes returns the routes registered in the non-test Go files of
// dir: the patterns of every HandleFunc and Handle call, which must be
// string constants (literals, the package's string constants and their
// concatenations) for this test to read them.
func sourceRoutes(t *testing.T, dir string) []route {
	t.Helper()
	fset := token.NewFileSet()
	files := parseDir(t, fset, dir)
	consts := map[string]ast.Expr{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[name.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	var eval func(ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return s, e.Kind == token.STRING && err == nil
		case *ast.Ident:
			if v, ok := consts[e.Name]; ok {
				return eval(v)
			}
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			x, okx := eval(e.X)
			y, oky := eval(e.Y)
			return x + y, okx && oky && e.Op == token.ADD
		}
		return "", false
	}
	var out []route
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			p, ok := eval(call.Args[0])
			if !ok {
				t.Errorf("%s: route pattern is not a string constant; this test cannot read it", fset.Position(call.Pos()))
				return true
			}
			if p != "/" { // the not-found fallback
				out = append(out, parsePattern(p))
			}
			return true
		})
	}
	return out
}

// samplePath fills the parameters of a document path with values that no
// fixed path segment has.
func samplePath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "p-" + strings.Trim(s, "{}")
			if s == "{port}" {
				segs[i] = "8080"
			}
		}
	}
	return strings.Join(segs, "/")
}

// mcpPath is where package mcpserver serves MCP's streamable HTTP.
const mcpPath = "/mcp"

// probeMethods are the methods TestOpenAPIRoutes tries on every path.
var probeMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// TestOpenAPIRoutes checks that the document lists exactly the routes the
// server registers, two ways: (1) the patterns registered in this
// package's source (and package gateway's, once it exists) are the
// document's operations; (2) on the real handler, every documented
// operation is served by its own route, and every method the mux serves
// on a documented path is documented.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := map[route]bool{}
	docPaths := map[string][]string{}
	for key := range operations(doc) {
		method, path, _ := strings.Cut(key, " ")
		documented[route{method, path}] = true
		docPaths[path] = append(docPaths[path], method)
	}

	// (1) The source.
	registered := sourceRoutes(t, ".")
	gatewayRoutes := 0
	if _, err := os.Stat(filepath.Join("..", "gateway")); err == nil {
		gw := sourceRoutes(t, filepath.Join("..", "gateway"))
		gatewayRoutes = len(gw)
		registered = append(registered, gw...)
	}
	registered = append(registered, sourceRoutes(t, filepath.Join("..", "mcpserver"))...)
	matched := map[route]bool{}
	for _, r := range registered {
		if r.method == "*" {
			if len(docPaths[r.path]) == 0 {
				t.Errorf("route %s (any method) is not in api/openapi.yaml", r.path)
			}
			for _, m := range docPaths[r.path] {
				matched[route{m, r.path}] = true
			}
			continue
		}
		if !documented[r] {
			t.Errorf("route %s is registered but not in api/openapi.yaml", r)
		}
		matched[r] = true
	}
	for r := range documented {
		if !matched[r] {
			if strings.HasPrefix(r.path, gatewayPrefix) && gatewayRoutes == 0 {
				continue // package gateway is not written yet
			}
			t.Errorf("%s is in api/openapi.yaml but no route registers it", r)
		}
	}

	// (2) The real handler.
	e := newOpenAPIEnv(t)
	served := func(method, path string) (route, bool) {
		req := httptest.NewRequest(method, path, nil)
		_, pattern := e.mux.Handler(req)
		if pattern == "" || pattern == "/" {
			return route{}, false
		}
		return parsePattern(pattern), true
	}
	for path, methods := range docPaths {
		concrete := samplePath(path)
		for _, m := range probeMethods {
			r, ok := served(m, concrete)
			wanted := slices.Contains(methods, m) || m == "HEAD" && slices.Contains(methods, "GET")
			switch {
			case strings.HasPrefix(path, gatewayPrefix) && !ok:
				// Package gateway serves these paths; this handler is
				// built without it.
			case !ok && wanted:
				t.Errorf("%s %s is documented but the handler does not route it", m, path)
			case ok && r.path == path && !wanted:
				t.Errorf("%s %s is routed (%s) but not documented", m, path, r)
			case ok && r.path != path:
				// Another, overlapping route serves it, such as DELETE
				// /api/v1/images/{ref...} for DELETE /api/v1/images/prepull.
				if wanted {
					t.Errorf("%s %s is served by %s instead of its own route", m, path, r)
				}
				if m != "HEAD" && !documented[route{m, r.path}] {
					t.Errorf("%s %s is served by the undocumented %s", m, concrete, r)
				}
			}
		}
	}
}

// oaEnv is the full API (sandboxes, images, templates, prepull, API keys)
// over a real manager, template and prepull services, a fake runtime, fake
// images and a sqlite store, whose every exchange a test validates against
// api/openapi.yaml.
type oaEnv struct {
	doc *openapi3.T
	// published is the document as clients read it, its objects open
	// (doc closes them): a response must conform to it too, so that a
	// oneOf whose alternatives an open object matches both of fails.
	published *openapi3.T
	srv       *Server
	h         http.Handler
	mux       *http.ServeMux
	key       string
	pulls     *prepulltest.Images
	llm       *llmEnv
	rt        *fakeruntime.Runtime
	covered   map[string]int // operationId: exchanges
}

func newOpenAPIEnv(t *testing.T) *oaEnv {
	t.Helper()
	doc := loadOpenAPI(t)
	closeSchemas(doc)
	published := loadOpenAPI(t)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	pulls := prepulltest.NewImages()
	var tpl *template.Service // built after pp, which it takes
	pp := prepull.New(st, pulls, log, prepull.WithTemplates(prepull.TemplateResolverFunc(
		func(ctx context.Context, name string, v int) (api.TemplateSpec, int, error) {
			return tpl.Resolve(ctx, name, v)
		})))
	tpl = template.New(st, template.WithPrepuller(pp), template.WithLogger(log))
	imgs := newFakeImages("alpine")
	rt := fakeruntime.New(fakeruntime.WithImages(imgs))
	mt := metrics.New()
	m := manager.New(manager.Config{StartTimeout: 10 * time.Second, MaxSandboxes: 3,
		Host: manager.Host{MilliCPU: 3500, MemoryBytes: 64 << 30}, CPUOvercommit: 1, MemoryOvercommit: 1}, rt, st, log,
		manager.WithTemplates(tpl), manager.WithMetrics(mt))
	key := auth.NewKey()
	keys, err := auth.NewKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	capture := &muxCapture{}
	ctxs := contexts.New(contexts.Config{}, m, st, nil, log, contexts.WithMetrics(mt))
	sess, err := session.New(session.Config{}, m, st, ctxs, log)
	if err != nil {
		t.Fatal(err)
	}
	ctxs.SetSessions(sess)
	if err := mt.Register(m, ctxs, sess); err != nil {
		t.Fatal(err)
	}
	llmE := newLLMEnv(t, st)
	runs, err := run.New(run.Config{Dir: filepath.Join(t.TempDir(), "runs")}, service.NewSandboxes(m, ""), st, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(service.NewSandboxes(m, "http://gw.test"), service.NewImages(imgs), log, WithRoutes(NewRunRoutes(runs)),
		WithRoutes(NewTemplateRoutes(tpl)), WithRoutes(NewPrepullRoutes(pp)), WithRoutes(capture),
		WithRoutes(NewLLMArchiveRoutes(service.NewLLMExchanges(llmE.arc))),
		WithRoutes(NewContextRoutes(service.NewContexts(ctxs))), WithRoutes(NewSessionRoutes(sess)), WithMetrics(mt),
		WithRoutes(NewLLMRoutes(gate.NewKeys(st))),
		WithRoutes(mcpserver.New(mcpserver.Config{ScopeByKey: true, Log: log}, service.NewContexts(ctxs), sess)),
		WithMiddleware(AuthMiddleware(keys)), WithMiddleware(TenantMiddleware))
	srv.SetReady(true)
	h := srv.Handler()
	t.Cleanup(func() {
		pp.Close()
		m.Close()
		rt.Close()
		llmE.arc.Close()
		st.Close()
	})
	return &oaEnv{doc: doc, published: published, srv: srv, h: h, mux: capture.mux, key: key, pulls: pulls, llm: llmE, rt: rt, covered: map[string]int{}}
}

// exchange is one request of a scripted session and what must come of it.
type exchange struct {
	method, target string
	ctype          string
	body           []byte
	header         map[string]string
	noKey          bool // send no API key
	status         int
	// The document must refuse the request (reqInvalid), or cannot tell
	// why the server refuses it (reqUnchecked); otherwise it must accept it.
	reqInvalid, reqUnchecked bool
	// leave, for a stream that does not end: the client leaves after it.
	leave time.Duration
}

func jsonBody(s string) ([]byte, string) { return []byte(s), "application/json" }

// authenticate is the check of security schemes for ValidateRequest: the
// credential is present (whether it is right is the server's business).
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header
	switch in.SecuritySchemeName {
	case "bearerAuth":
		if !strings.HasPrefix(h.Get("Authorization"), "Bearer ") {
			return errors.New("no bearer token")
		}
	case "accessToken":
		if h.Get("X-Access-Token") == "" {
			return errors.New("no access token")
		}
	default:
		return fmt.Errorf("unknown security scheme %s", in.SecuritySchemeName)
	}
	return nil
}

// do sends x through the handler and checks the request, the status and
// the response against the document.
func (e *oaEnv) do(t *testing.T, x exchange) response {
	t.Helper()
	what := x.method + " " + x.target
	newReq := func() *http.Request {
		req := httptest.NewRequest(x.method, x.target, bytes.NewReader(x.body))
		if x.ctype != "" {
			req.Header.Set("Content-Type", x.ctype)
		}
		if !x.noKey {
			req.Header.Set("Authorization", "Bearer "+e.key)
		}
		for k, v := range x.header {
			req.Header.Set(k, v)
		}
		return req
	}

	// Find the operation through the pattern that serves the request.
	vreq := newReq()
	_, pattern := e.mux.Handler(vreq)
	if pattern == "" || pattern == "/" {
		t.Fatalf("%s: no route serves it", what)
	}
	rt := parsePattern(pattern)
	item := e.doc.Paths.Value(rt.path)
	var op *openapi3.Operation
	if item != nil {
		op = item.GetOperation(x.method)
	}
	if op == nil {
		t.Fatalf("%s: served by %s, which api/openapi.yaml lacks", what, pattern)
	}
	e.covered[op.OperationID]++
	input := &openapi3filter.RequestValidationInput{
		Request:    vreq,
		PathParams: pathParams(pattern, vreq.URL.EscapedPath()),
		Route:      &routers.Route{Spec: e.doc, Path: rt.path, PathItem: item, Method: x.method, Operation: op},
		Options: &openapi3filter.Options{
			AuthenticationFunc:                authenticate,
			RejectWhenRequestBodyNotSpecified: true,
			SkipSettingDefaults:               true,
		},
	}
	reqErr := openapi3filter.ValidateRequest(context.Background(), input)
	switch {
	case x.reqUnchecked:
	case x.reqInvalid && reqErr == nil:
		t.Errorf("%s: api/openapi.yaml accepts the request, which the server refuses with %d", what, x.status)
	case !x.reqInvalid && reqErr != nil:
		t.Errorf("%s: api/openapi.yaml refuses the request: %v", what, reqErr)
	}

	rec := httptest.NewRecorder()
	sreq := newReq()
	if x.leave > 0 {
		ctx, cancel := context.WithTimeout(sreq.Context(), x.leave)
		defer cancel()
		sreq = sreq.WithContext(ctx)
	}
	e.h.ServeHTTP(rec, sreq)
	resp := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	if resp.status != x.status {
		t.Errorf("%s: status %d, want %d (body %.300s)", what, resp.status, x.status, resp.body)
	}

	// The status must be documented for the operation by itself, not only
	// by the default response.
	docResp := op.Responses.Status(resp.status)
	if docResp == nil {
		t.Errorf("%s: status %d is not documented for %s", what, resp.status, op.OperationID)
		return resp
	}
	// Validate against a request without the test's bad input, so that
	// the response is judged on its own; by the document with its objects
	// closed (a field it does not know fails) and as published, its
	// objects open (a oneOf whose alternatives one body matches both of
	// fails).
	for _, d := range []struct {
		doc *openapi3.T
		as  string
	}{{e.doc, ""}, {e.published, " as published"}} {
		item := d.doc.Paths.Value(rt.path)
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: newReq(), PathParams: input.PathParams, Options: input.Options,
				Route: &routers.Route{Spec: d.doc, Path: rt.path, PathItem: item, Method: x.method, Operation: item.GetOperation(x.method)},
			},
			Status:  resp.status,
			Header:  resp.header,
			Body:    io.NopCloser(bytes.NewReader(resp.body)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		})
		if err != nil {
			t.Errorf("%s: response %d does not conform to api/openapi.yaml%s: %v\nbody: %.500s", what, resp.status, d.as, err, resp.body)
		}
	}
	if len(docResp.Value.Content) == 0 && len(resp.body) != 0 {
		t.Errorf("%s: response %d has a body (%.100q); the document gives it none", what, resp.status, resp.body)
	}
	if mt := docResp.Value.Content.Get(sseMediaType); mt != nil && strings.HasPrefix(resp.header.Get("Content-Type"), sseMediaType) {
		e.checkEvents(t, what, mt, resp.body)
	}
	return resp
}

// checkEvents validates the data of each Server-Sent Event in body against
// the schema the media type's x-sse-events gives for the event's name.
func (e *oaEnv) checkEvents(t *testing.T, what string, mt *openapi3.MediaType, body []byte) {
	t.Helper()
	schemas, _ := mt.Extensions["x-sse-events"].(map[string]any)
	if len(schemas) == 0 {
		t.Fatalf("%s: the document names no x-sse-events", what)
	}
	events := readEvents(t, body)
	if len(events) == 0 {
		t.Errorf("%s: no events", what)
	}
	for _, ev := range events {
		ref, _ := schemas[ev.name].(string)
		s := e.doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		if s == nil {
			t.Errorf("%s: event %q is not documented", what, ev.name)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Errorf("%s: event %s: data %q is not JSON: %v", what, ev.name, ev.data, err)
			continue
		}
		if err := s.Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
			t.Errorf("%s: event %s does not conform to %s: %v\ndata: %s", what, ev.name, ref, err, ev.data)
		}
	}
}

// pathParams reads the values of pattern's wildcards from an escaped path,
// as the mux does.
func pathParams(pattern, escaped string) map[string]string {
	_, p, ok := strings.Cut(pattern, " ")
	if !ok {
		p = pattern
	}
	pat, segs := strings.Split(p, "/"), strings.Split(escaped, "/")
	out := map[string]string{}
	for i, s := range pat {
		if !strings.HasPrefix(s, "{") || i >= len(segs) {
			continue
		}
		name, rest := strings.CutSuffix(strings.Trim(s, "{}"), "...")
		v := segs[i]
		if rest {
			v = strings.Join(segs[i:], "/")
		}
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		out[name] = v
	}
	return out
}

// decodeInto unmarshals a response body.
func decodeInto[T any](t *testing.T, resp response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(resp.body, &v); err != nil {
		t.Fatalf("decode %s: %v", resp.body, err)
	}
	return v
}

// TestOpenAPIConformance drives a session through every operation of the
// real handler, successes and errors (400, 401, 403, 404, 409, 413, 429, 503),
// and validates every request and response against api/openapi.yaml.
func TestOpenAPIConformance(t *testing.T) {
	e := newOpenAPIEnv(t)
	const (
		ok        = http.StatusOK
		created   = http.StatusCreated
		accepted  = http.StatusAccepted
		noContent = http.StatusNoContent
		bad       = http.StatusBadRequest
		forbidden = http.StatusForbidden
		notFound  = http.StatusNotFound
		conflict  = http.StatusConflict
	)
	post := func(target, body string, status int) exchange {
		b, ct := jsonBody(body)
		return exchange{method: "POST", target: target, body: b, ctype: ct, status: status}
	}
	get := func(target string, status int) exchange {
		return exchange{method: "GET", target: target, status: status}
	}
	invalid := func(x exchange) exchange { x.reqInvalid = true; return x }
	unchecked := func(x exchange) exchange { x.reqUnchecked = true; return x }
	run := func(xs ...exchange) {
		t.Helper()
		for _, x := range xs {
			e.do(t, x)
		}
	}

	// Probes, without a key; readiness both ways.
	run(
		exchange{method: "GET", target: "/health", noKey: true, status: ok},
		exchange{method: "GET", target: "/api/v1/health", noKey: true, status: ok},
		exchange{method: "GET", target: "/readyz", noKey: true, status: ok},
		exchange{method: "GET", target: "/api/v1/version", status: ok},
		exchange{method: "GET", target: "/api/v1/capabilities", status: ok},
	)
	e.srv.SetReady(false)
	run(exchange{method: "GET", target: "/readyz", noKey: true, status: http.StatusServiceUnavailable})
	e.srv.SetReady(true)

	// API keys.
	run(
		invalid(exchange{method: "GET", target: "/api/v1/sandboxes", noKey: true, status: http.StatusUnauthorized}),
		exchange{method: "GET", target: "/api/v1/sandboxes", header: map[string]string{"Authorization": "Bearer wrong"},
			status: http.StatusUnauthorized},
	)

	// Images.
	run(
		get("/api/v1/images", ok),
		post("/api/v1/images/pull", `{"ref":"busybox"}`, ok),
		post("/api/v1/images/pull", `{"ref":"missing/image"}`, ok), // an error event
		invalid(post("/api/v1/images/pull", `{}`, bad)),
		invalid(post("/api/v1/images/pull", `{"ref":""}`, bad)),
		post("/api/v1/images/build", `{"ref":"agent2env/python"}`, ok),
		post("/api/v1/images/build", `{"ref":"nope"}`, ok),
		get("/api/v1/images/follow?ref=agent2env/python", ok),
		get("/api/v1/images/follow?ref=nope", ok), // an error event
		invalid(get("/api/v1/images/follow", bad)),
		exchange{method: "POST", target: "/api/v1/images/import", ctype: "application/x-tar",
			body: []byte("archive\nimp/one imp/two:1"), status: ok},
		exchange{method: "POST", target: "/api/v1/images/import", ctype: "application/octet-stream",
			body: []byte("not an archive"), status: ok},
		exchange{method: "DELETE", target: "/api/v1/images/imp/two:1", status: noContent},
		exchange{method: "DELETE", target: "/api/v1/images/imp/two:1", status: notFound},
	)

	// Templates.
	run(
		post("/api/v1/templates", `{"name":"py","displayName":"Python","description":"d","tags":["lang"],"isPublic":false,
			"spec":{"image":"alpine","env":{"A":"1"},"files":[{"destination":"/workspace/a.txt","content":"a"}],
			"network":{"allowInternetAccess":false,"allowedDomains":["Example.COM"]},
			"persistence":{"enabled":true,"storageClassName":"fast"}}}`, created),
		post("/api/v1/templates", `{"name":"plain","spec":{"image":"alpine"},"autoPrepull":true}`, created),
		post("/api/v1/templates", `{"name":"py","spec":{"image":"alpine"}}`, conflict),
		invalid(post("/api/v1/templates", `{"name":"Bad Name","spec":{"image":"alpine"}}`, bad)),
		invalid(post("/api/v1/templates", `{"name":"nospec"}`, bad)),
		unchecked(post("/api/v1/templates", `{"name":"badcpu","spec":{"image":"alpine","resources":{"cpu":"lots"}}}`, bad)),
		get("/api/v1/templates", ok),
		get("/api/v1/templates?tag=lang&search=py&page=1&pageSize=10", ok),
		get("/api/v1/templates/py", ok),
		get("/api/v1/templates/nope", notFound),
		exchange{method: "PUT", target: "/api/v1/templates/py", ctype: "application/json", status: ok,
			body: []byte(`{"spec":{"image":"alpine","ttl":3600,"resources":{"cpu":"1","memory":"1Gi"},"startupTimeout":60,
				"readinessProbe":{"exec":{"command":["true"]}}},"changelog":"v2","tags":null}`)},
		exchange{method: "PUT", target: "/api/v1/templates/nope", ctype: "application/json", status: notFound,
			body: []byte(`{"spec":{"image":"alpine"}}`)},
		invalid(exchange{method: "PUT", target: "/api/v1/templates/py", ctype: "application/json", status: bad,
			body: []byte(`{"spec":{"image":""}}`)}),
		get("/api/v1/templates/py/versions", ok),
		get("/api/v1/templates/py/versions?limit=1&order=asc", ok),
		invalid(get("/api/v1/templates/py/versions?limit=0", bad)),
		invalid(get("/api/v1/templates/py/versions?order=newest", bad)),
		get("/api/v1/templates/py/versions?cursor=nope", bad),
		get("/api/v1/templates/nope/versions", notFound),
		get("/api/v1/templates/py/versions/1", ok),
		get("/api/v1/templates/py/versions/9", notFound),
		invalid(get("/api/v1/templates/py/versions/first", bad)),
		post("/api/v1/templates/py/rollback", `{"targetVersion":1}`, ok),
		post("/api/v1/templates/py/rollback", `{"targetVersion":9,"changelog":"x"}`, notFound),
		invalid(post("/api/v1/templates/py/rollback", `{"targetVersion":0}`, bad)),
		get("/api/v1/templates/py/export", ok),
		get("/api/v1/templates/py/export?version=2", ok),
		get("/api/v1/templates/plain/export", ok),
		invalid(get("/api/v1/templates/py/export?version=latest", bad)),
		get("/api/v1/templates/nope/export", notFound),
		get("/api/v1/templates/export", ok),
		get("/api/v1/templates/export?tag=lang&names=py,plain&names=other", ok),
	)

	// Import.
	list := `apiVersion: liteboxd/v1
kind: SandboxTemplateList
items:
  - apiVersion: liteboxd/v1
    kind: SandboxTemplate
    metadata: {name: imported, tags: [x]}
    spec: {image: alpine, startupscript: "echo hi"}
  - metadata: {name: py}
    spec: {image: alpine}
  - metadata: {name: ""}
    spec: {image: alpine}
  - metadata: {name: broken}
    spec: {image: ""}
`
	ct, body := multipartBody(t, "strategy", "create-or-update", "prepull", "true", "file", list)
	run(exchange{method: "POST", target: "/api/v1/templates/import", ctype: ct, body: body.Bytes(), status: ok})
	ct, body = multipartBody(t, "file", tplDoc("imported", "alpine"))
	run(exchange{method: "POST", target: "/api/v1/templates/import?strategy=create-only", ctype: ct, body: body.Bytes(), status: ok})
	ct, body = multipartBody(t, "file", "{not yaml")
	run(exchange{method: "POST", target: "/api/v1/templates/import", ctype: ct, body: body.Bytes(), status: bad})
	ct, body = multipartBody(t, "strategy", "update-only")
	run(invalid(exchange{method: "POST", target: "/api/v1/templates/import", ctype: ct, body: body.Bytes(), status: bad}))
	ct, body = multipartBody(t, "strategy", "sideways", "file", tplDoc("imported", "alpine"))
	run(invalid(exchange{method: "POST", target: "/api/v1/templates/import", ctype: ct, body: body.Bytes(), status: ok}))
	form := url.Values{"file": {tplDoc("formed", "alpine")}, "strategy": {"create-only"}}
	run(exchange{method: "POST", target: "/api/v1/templates/import", ctype: "application/x-www-form-urlencoded",
		body: []byte(form.Encode()), status: ok})

	// Sandboxes.
	var sb api.Sandbox
	resp := e.do(t, post("/api/v1/sandboxes", `{"template":"py","overrides":{"ttl":0,"env":{"B":"2"},"cpu":"250m"}}`, created))
	if resp.status == created {
		sb = decodeInto[api.Sandbox](t, resp)
	}
	if sb.ID == "" {
		t.Fatal("no sandbox to go on with")
	}
	sbPath := "/api/v1/sandboxes/" + sb.ID
	// The template has files to put in place: the sandbox starts in the
	// background.
	waitRunning := func() {
		t.Helper()
		waitFor(t, e.h, e.key, sbPath, func(b []byte) bool {
			var s api.Sandbox
			return json.Unmarshal(b, &s) == nil && s.Status == api.StatusRunning
		})
	}
	waitRunning()
	run(post("/api/v1/sandboxes", `{"image":"alpine","cpu":"4"}`, http.StatusInsufficientStorage))
	resp = e.do(t, post("/api/v1/sandboxes", `{"image":"alpine","cpu":"500m","memory":"256Mi","ttl":60,"env":{"G":"hi"}}`, created))
	other := decodeInto[api.Sandbox](t, resp).ID
	huge := `{"image":"` + strings.Repeat("a", maxJSONBody) + `"}`
	run(
		post("/api/v1/sandboxes", `{"template":"py","templateVersion":2}`, created),
		post("/api/v1/sandboxes", `{"image":"alpine"}`, http.StatusTooManyRequests),
		post("/api/v1/sandboxes", `{"template":"nope"}`, notFound),
		post("/api/v1/sandboxes", `{"template":"py","templateVersion":99}`, notFound),
		invalid(post("/api/v1/sandboxes", `{}`, bad)),
		invalid(post("/api/v1/sandboxes", `{"template":"py","image":"alpine"}`, bad)),
		invalid(post("/api/v1/sandboxes", `{"image":5}`, bad)),
		invalid(post("/api/v1/sandboxes", `{"image":"alpine","ttl":-1}`, bad)),
		unchecked(post("/api/v1/sandboxes", `{"image":"alpine","overrides":{"ttl":1}}`, bad)),
		unchecked(post("/api/v1/sandboxes", `{"image":"alpine","templateVersion":2}`, bad)),
		unchecked(post("/api/v1/sandboxes", `{"image":"Not A Ref!"}`, bad)),
		post("/api/v1/sandboxes", huge, http.StatusRequestEntityTooLarge),
		invalid(exchange{method: "POST", target: "/api/v1/sandboxes", ctype: "text/plain", body: []byte(`{"image":"alpine"}`), status: http.StatusUnsupportedMediaType}),
		get("/api/v1/sandboxes", ok),
		get("/api/v1/sandboxes?limit=1", ok),
		get("/api/v1/sandboxes?limit=1&order=desc", ok),
		invalid(get("/api/v1/sandboxes?limit=0", bad)),
		invalid(get("/api/v1/sandboxes?order=newest", bad)),
		get("/api/v1/sandboxes?limit=1&cursor=garbage", bad),
		get(sbPath, ok),
		get("/api/v1/sandboxes/nosuchsandbox", notFound),

		post(sbPath+"/exec", `{"command":["sh","-c","echo $A $B; echo err >&2; exit 3"]}`, ok),
		post(sbPath+"/exec", `{"command":["cat"],"stdin":"in","cwd":"/tmp","env":{"X":"1"},"timeout":5}`, ok),
		post(sbPath+"/exec", `{"command":["sleep","10"],"timeout":1}`, ok),
		invalid(post(sbPath+"/exec", `{"command":[]}`, bad)),
		invalid(post(sbPath+"/exec", `{"command":["true"],"timeout":-1}`, bad)),
		invalid(post(sbPath+"/exec", `{"command":["true"],"timeout":86401}`, bad)),
		invalid(post(sbPath+"/exec", `{"timeout":1}`, bad)),
		post("/api/v1/sandboxes/nosuchsandbox/exec", `{"command":["true"]}`, notFound),
		post(sbPath+"/exec/stream", `{"command":["sh","-c","echo out; echo err >&2; exit 2"]}`, ok),
		post(sbPath+"/exec/stream", `{"command":["sleep","10"],"timeout":1}`, ok),
		invalid(post(sbPath+"/exec/stream", `{"command":[]}`, bad)),
		post("/api/v1/sandboxes/nosuchsandbox/exec/stream", `{"command":["true"]}`, notFound),
		// The WebSocket itself is tested in internal/e2e; a plain GET is
		// refused before any upgrade.
		get(sbPath+"/exec/interactive?command=true", bad),
		invalid(get(sbPath+"/exec/interactive?tty=maybe", bad)),
		post(sbPath+"/exec/interactive/ticket", ``, created),
		post("/api/v1/sandboxes/nosuchsandbox/exec/interactive/ticket", ``, notFound),

		// Persistent terminals; attaching is tested in terminals_test.go.
		post(sbPath+"/terminals", `{"name":"main","command":["sleep","60"],"rows":30,"cols":100,"env":{"A":"1"},"cwd":"/tmp"}`, created),
		post(sbPath+"/terminals", `{"name":"main"}`, conflict),
		post(sbPath+"/terminals", `{"command":["sleep","60"]}`, created),
		invalid(post(sbPath+"/terminals", `{"name":"-x"}`, bad)),
		invalid(post(sbPath+"/terminals", `{"name":"z7","bogus":1}`, bad)),
		post("/api/v1/sandboxes/nosuchsandbox/terminals", `{}`, notFound),
		get(sbPath+"/terminals", ok),
		get(sbPath+"/terminals/main", ok),
		get(sbPath+"/terminals/nope", notFound),
		get(sbPath+"/terminals/main/attach", bad),
		invalid(get(sbPath+"/terminals/main/attach?since=-1", bad)),
		exchange{method: "DELETE", target: sbPath + "/terminals/main", status: ok},
		exchange{method: "DELETE", target: sbPath + "/terminals/main", status: notFound},
	)

	// Files.
	ct, body = multipartBody(t, "path", "dir/hello.txt", "mode", "0600", "file", "hello")
	run(exchange{method: "POST", target: sbPath + "/files", ctype: ct, body: body.Bytes(), status: ok})
	ct, body = multipartBody(t, "file", "query path")
	run(exchange{method: "POST", target: sbPath + "/files?path=/tmp/q.txt", ctype: ct, body: body.Bytes(), status: ok})
	ct, body = multipartBody(t, "file", "no path")
	run(unchecked(exchange{method: "POST", target: sbPath + "/files", ctype: ct, body: body.Bytes(), status: bad}))
	ct, body = multipartBody(t, "path", "x", "mode", "rwx", "file", "bad mode")
	run(invalid(exchange{method: "POST", target: sbPath + "/files", ctype: ct, body: body.Bytes(), status: bad}))
	ct, body = multipartBody(t, "path", "x")
	run(invalid(exchange{method: "POST", target: sbPath + "/files", ctype: ct, body: body.Bytes(), status: bad}))
	// What the sandbox's user may not do (the fake's agent reaches the
	// host's files outside /workspace and /tmp): make a file where the
	// kernel takes none (/sys, root too), read a file no one may read.
	ct, body = multipartBody(t, "path", "/sys/a2e-denied", "file", "x")
	run(exchange{method: "POST", target: sbPath + "/files", ctype: ct, body: body.Bytes(), status: forbidden})
	run(get(sbPath+"/files?path=/proc/sys/vm/drop_caches", forbidden))
	ct, body = multipartBody(t, "path", "x", "file", "x")
	run(
		exchange{method: "POST", target: "/api/v1/sandboxes/nosuchsandbox/files", ctype: ct, body: body.Bytes(), status: notFound},
		invalid(post(sbPath+"/files", `{"path":"x"}`, http.StatusUnsupportedMediaType)),
		get(sbPath+"/files?path=dir/hello.txt", ok),
		get(sbPath+"/files?path=/tmp/q.txt", ok),
		get(sbPath+"/files?path=missing.txt", notFound),
		unchecked(get(sbPath+"/files?path=../etc/passwd", bad)),
		get(sbPath+"/files/list?path=dir", ok),
		get(sbPath+"/files/list", ok),
		get(sbPath+"/files/list?path=missing", notFound),
		get(sbPath+"/files/list?path=dir/hello.txt", bad),
		get(sbPath+"/files/stat?path=dir/hello.txt", ok),
		get(sbPath+"/files/stat?path=dir", ok),
		get(sbPath+"/files/stat?path=missing", notFound),
		invalid(get(sbPath+"/files/stat", bad)),
		unchecked(get(sbPath+"/files/stat?path=../etc/passwd", bad)),
		get("/api/v1/sandboxes/nosuchsandbox/files/stat?path=x", notFound),
		invalid(get(sbPath+"/files", bad)),
		get("/api/v1/sandboxes/nosuchsandbox/files?path=x", notFound),
		get(sbPath+"/logs", ok),
		get("/api/v1/sandboxes/nosuchsandbox/logs", notFound),
	)

	// Contexts, in the sandbox (the limit of three sandboxes is reached).
	resp = e.do(t, post("/api/v1/contexts", `{"type":"jupyter","language":"python","session_name":"s1","working_dir":"/workspace","sandbox_id":"`+sb.ID+`"}`, created))
	ctxID := decodeInto[api.Context](t, resp).ContextID
	resp = e.do(t, post(sbPath+"/contexts", `{"language":"bash"}`, created))
	bashID := decodeInto[api.Context](t, resp).ContextID
	run(
		post("/api/v1/contexts", `{"language":"python"}`, http.StatusTooManyRequests),
		invalid(post("/api/v1/contexts", `{"language":"cobol"}`, bad)),
		invalid(post("/api/v1/contexts", `{"type":5}`, bad)),
		post("/api/v1/sandboxes/nosuchsandbox/contexts", `{}`, notFound),
		get("/api/v1/contexts", ok),
		get("/api/v1/contexts?session_name=s1&sandbox_id="+sb.ID, ok),
		get("/api/v1/contexts?order=desc", ok),
		get("/api/v1/contexts?limit=1", ok),
		invalid(get("/api/v1/contexts?order=newest", bad)),
		invalid(get("/api/v1/contexts?limit=0", bad)),
		get("/api/v1/contexts?cursor=nope", bad),
		get("/api/v1/contexts/"+ctxID, ok),
		get("/api/v1/contexts/ctx-none", notFound),
		get(sbPath+"/contexts", ok),
		get(sbPath+"/contexts?order=desc", ok),
		get(sbPath+"/contexts?limit=1", ok),
		invalid(get(sbPath+"/contexts?limit=1001", bad)),
		invalid(get(sbPath+"/contexts?order=newest", bad)),
		get(sbPath+"/contexts/"+bashID, ok),
		get(sbPath+"/contexts/ctx-none", notFound),
		get("/api/v1/sandboxes/nosuchsandbox/contexts", notFound),
		post("/api/v1/contexts/"+ctxID+"/execute", `{"code":"print(\"Hello from Local Sandbox\")","timeout":30}`, ok),
		post("/api/v1/contexts/"+ctxID+"/execute", `{"code":"1/0"}`, ok),
		post("/api/v1/contexts/"+ctxID+"/execute", `{"code":"import time\ntime.sleep(5)","timeout":0.2}`, ok),
		invalid(post("/api/v1/contexts/"+ctxID+"/execute", `{"code":"1","timeout":-1}`, bad)),
		invalid(post("/api/v1/contexts/"+ctxID+"/execute", `{}`, bad)),
		post("/api/v1/contexts/ctx-none/execute", `{"code":"1"}`, notFound),
		post("/api/v1/contexts/"+ctxID+"/execute/stream", `{"code":"print(1)\n2"}`, ok),
		post("/api/v1/contexts/"+ctxID+"/execute/stream", `{"code":"raise ValueError('x')"}`, ok),
		post("/api/v1/contexts/ctx-none/execute/stream", `{"code":"1"}`, notFound),
		post(sbPath+"/contexts/"+bashID+"/execute", `{"code":"echo hi"}`, ok),
		post(sbPath+"/contexts/ctx-none/execute", `{"code":"echo hi"}`, notFound),
		post(sbPath+"/contexts/"+bashID+"/execute/stream", `{"code":"echo hi; exit_status_is_not_zero"}`, ok),
		post(sbPath+"/contexts/ctx-none/execute/stream", `{"code":"1"}`, notFound),
		get("/metrics", ok),
		exchange{method: "DELETE", target: sbPath + "/contexts/" + bashID, status: ok},
		exchange{method: "DELETE", target: sbPath + "/contexts/" + bashID, status: notFound},
		exchange{method: "DELETE", target: "/api/v1/contexts/" + ctxID, status: ok},
		exchange{method: "DELETE", target: "/api/v1/contexts/" + ctxID, status: notFound},
	)

	// Stop, start, restart.
	run(
		exchange{method: "POST", target: sbPath + "/stop", status: ok},
		exchange{method: "POST", target: sbPath + "/stop", status: conflict},
		post(sbPath+"/exec", `{"command":["true"]}`, conflict),
		exchange{method: "POST", target: sbPath + "/start", status: ok},
	)
	waitRunning()
	run(
		exchange{method: "POST", target: sbPath + "/start", status: conflict},
		exchange{method: "POST", target: sbPath + "/restart", status: ok},
		exchange{method: "POST", target: "/api/v1/sandboxes/nosuchsandbox/stop", status: notFound},
		exchange{method: "POST", target: "/api/v1/sandboxes/nosuchsandbox/start", status: notFound},
		exchange{method: "POST", target: "/api/v1/sandboxes/nosuchsandbox/restart", status: notFound},
		exchange{method: "POST", target: "/api/v1/sandboxes/nosuchsandbox/pause", status: notFound},
		exchange{method: "POST", target: "/api/v1/sandboxes/nosuchsandbox/resume", status: notFound},
		exchange{method: "DELETE", target: "/api/v1/sandboxes/" + other, status: noContent},
		exchange{method: "DELETE", target: "/api/v1/sandboxes/" + other, status: notFound},
	)

	// Pause and resume; a runtime that cannot is 501.
	waitRunning()
	run(
		exchange{method: "POST", target: sbPath + "/resume", status: conflict},
		exchange{method: "POST", target: sbPath + "/pause", status: ok},
		exchange{method: "POST", target: sbPath + "/pause", status: conflict},
		post(sbPath+"/exec", `{"command":["true"]}`, conflict),
		exchange{method: "POST", target: sbPath + "/resume", status: ok},
	)
	caps := e.rt.Capabilities()
	e.rt.SetCapabilities(sandbox.Capabilities{LocalFiles: true})
	run(exchange{method: "POST", target: sbPath + "/pause", status: http.StatusNotImplemented})
	e.rt.SetCapabilities(caps)

	// Snapshots: this runtime has none (the e2e test takes real ones).
	run(
		post(sbPath+"/snapshots", `{"stop":false}`, http.StatusNotImplemented),
		post("/api/v1/sandboxes/nosuchsandbox/snapshots", `{}`, notFound),
		get("/api/v1/snapshots", ok),
		get("/api/v1/snapshots?sandbox_id="+sb.ID, ok),
		get("/api/v1/snapshots?limit=1&order=asc", ok),
		invalid(get("/api/v1/snapshots?limit=0", bad)),
		invalid(get("/api/v1/snapshots?order=newest", bad)),
		get("/api/v1/snapshots?cursor=nope", bad),
		get("/api/v1/snapshots/snap-none", notFound),
		post(sbPath+"/fork", `{"count":2}`, http.StatusNotImplemented),
		post("/api/v1/snapshots/snap-none/fork", `{"count":1}`, notFound),
		exchange{method: "DELETE", target: "/api/v1/snapshots/snap-none", status: notFound},
	)

	// Sessions: one sandbox is free for one.
	run(
		post("/api/v1/sessions/execute", `{"code":"print(1)","session_id":"big","flavor":"large"}`, http.StatusInsufficientStorage),
		post("/api/v1/sessions/execute", `{"code":"x = 100\nprint(x)","language":"python","session_id":"s1","timeout":30}`, ok),
		post("/api/v1/sessions/execute", `{"code":"x","session_id":"s1"}`, ok),
		post("/api/v1/sessions/s1/execute", `{"code":"console.log(1)","language":"javascript"}`, ok),
		post("/api/v1/sessions/command", `{"command":"echo hi; exit 2","session_id":"s1","cwd":"/tmp","env":{"A":"1"}}`, ok),
		post("/api/v1/sessions/s1/command", `{"command":["sleep","5"],"timeout":0.2}`, ok),
		post("/api/v1/sessions/execute", `{"code":"1"}`, http.StatusTooManyRequests),
		invalid(post("/api/v1/sessions/execute", `{"session_id":"s1"}`, bad)),
		invalid(post("/api/v1/sessions/execute", `{"code":"1","language":"cobol","session_id":"s1"}`, bad)),
		unchecked(post("/api/v1/sessions/execute", `{"code":"1","session_id":"a b"}`, bad)),
		unchecked(post("/api/v1/sessions/s1/execute", `{"code":"1","session_id":"s2"}`, bad)),
		invalid(post("/api/v1/sessions/command", `{"command":5,"session_id":"s1"}`, bad)),
		unchecked(post("/api/v1/sessions/command", `{"command":[],"session_id":"s1"}`, bad)),
		unchecked(post("/api/v1/sessions/command", `{"command":"true","session_id":"s1","cwd":"/nonexistent"}`, bad)),
		get("/api/v1/sessions", ok),
		get("/api/v1/sessions?limit=1&order=desc", ok),
		invalid(get("/api/v1/sessions?limit=0", bad)),
		invalid(get("/api/v1/sessions?order=newest", bad)),
		get("/api/v1/sessions?cursor=nope", bad),
		get("/api/v1/sessions/s1", ok),
		get("/api/v1/sessions/nope", notFound),
		exchange{method: "POST", target: "/api/v1/sessions/s1/keepalive", status: ok},
		post("/api/v1/sessions/s1/keepalive", `{"idle_timeout":600}`, ok),
		invalid(post("/api/v1/sessions/s1/keepalive", `{"idle_timeout":-1}`, bad)),
		exchange{method: "POST", target: "/api/v1/sessions/nope/keepalive", status: notFound},
		get("/api/v1/stats", ok),
		exchange{method: "DELETE", target: "/api/v1/sessions/s1", status: ok},
		exchange{method: "DELETE", target: "/api/v1/sessions/s1", status: notFound},
	)

	// Per-run LLM keys.
	resp = e.do(t, post("/api/v1/llm/keys", `{"name":"ci","run":"r1","budget_tokens":1000,"expires_in":600}`, created))
	llmKey := decodeInto[api.LLMKey](t, resp)
	if llmKey.Key == "" {
		t.Errorf("the new LLM key has no secret: %+v", llmKey)
	}
	run(
		invalid(post("/api/v1/llm/keys", `{"budget_tokens":-1}`, bad)),
		invalid(post("/api/v1/llm/keys", `{"foo":1}`, bad)),
		invalid(post("/api/v1/llm/keys", `{"expires_in":99999999}`, bad)),
		invalid(post("/api/v1/llm/keys", `{"expires_in":18446744074}`, bad)),
		get("/api/v1/llm/keys", ok),
		get("/api/v1/llm/keys?limit=1&order=asc", ok),
		invalid(get("/api/v1/llm/keys?limit=0", bad)),
		exchange{method: "DELETE", target: "/api/v1/llm/keys/" + llmKey.ID, status: noContent},
		exchange{method: "DELETE", target: "/api/v1/llm/keys/llmk_nope", status: notFound},
	)

	// MCP over streamable HTTP, stateless: each message stands alone.
	mcpMessage := func(body string, status int) exchange {
		return exchange{method: "POST", target: mcpPath, ctype: "application/json", body: []byte(body),
			header: map[string]string{"Accept": "application/json, text/event-stream"}, status: status}
	}
	noAccept := mcpMessage(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, bad)
	noAccept.header = nil
	run(
		mcpMessage(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"openapi-test","version":"1"}}}`, ok),
		mcpMessage(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, accepted),
		mcpMessage(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"1 + 1","session_id":"mcp"}}}`, ok),
		noAccept,
		invalid(mcpMessage(`[1`, bad)),
		invalid(exchange{method: "POST", target: mcpPath, ctype: "text/plain", body: []byte(`{}`), status: http.StatusUnsupportedMediaType}),
		invalid(exchange{method: "POST", target: mcpPath, ctype: "application/json", body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
			noKey: true, status: http.StatusUnauthorized}),
		exchange{method: "GET", target: mcpPath, status: http.StatusMethodNotAllowed},
		exchange{method: "DELETE", target: mcpPath, status: http.StatusMethodNotAllowed},
		exchange{method: "DELETE", target: "/api/v1/sessions/mcp", status: ok},
	)

	// Runs: recorded, not carried out (the runner's loop does not run
	// here), so a run stays queued until cancelled.
	resp = e.do(t, post("/api/v1/runs", `{"task":"name: t\nagent: custom\ngoal: g\nentrypoint: \"true\"\n","repeats":2,"parallel":1}`, created))
	runID := decodeInto[api.RunBatch](t, resp).Runs[0].ID
	run(
		invalid(post("/api/v1/runs", `{"task":5}`, bad)),
		invalid(post("/api/v1/runs", `{"task":"name: t\nagent: custom\ngoal: g\nentrypoint: x\n","repeat":2}`, bad)),
		unchecked(post("/api/v1/runs", `{"task":"name: t\nagent: custom\ngoal: g\nentrypoint: x\nimage: 'UPPER CASE!!'\n"}`, bad)),
		unchecked(post("/api/v1/runs", `{"task":"name: t\nagent: custom\ngoal: g\nentrypoint: x\nresources: {cpu: '1000'}\n"}`, bad)),
		unchecked(post("/api/v1/runs", `{"task":"name: t\nagent: custom\ngoal: g\nentrypoint: x\ntemplate: nosuchtpl\n"}`, notFound)),
		unchecked(post("/api/v1/runs", `{"task":"name: t\nagent: nope\ngoal: g\n"}`, bad)),
		unchecked(post("/api/v1/runs", `{}`, bad)),
		get("/api/v1/runs", ok),
		get("/api/v1/runs?limit=1", ok),
		get("/api/v1/runs?limit=1&order=desc", ok),
		invalid(get("/api/v1/runs?order=newest", bad)),
		unchecked(get("/api/v1/runs?limit=0", bad)),
		get("/api/v1/runs/"+runID, ok),
		get("/api/v1/runs/nope", notFound),
		exchange{method: "DELETE", target: "/api/v1/runs/" + runID, status: conflict},
		exchange{method: "POST", target: "/api/v1/runs/" + runID + "/cancel", status: ok},
		exchange{method: "POST", target: "/api/v1/runs/nope/cancel", status: notFound},
		get("/api/v1/runs/"+runID+"/events", ok),
		get("/api/v1/runs/nope/events", notFound),
		get("/api/v1/runs/"+runID+"/logs", ok),
		get("/api/v1/runs/nope/logs", notFound),
		get("/api/v1/runs/"+runID+"/artifacts", ok),
		get("/api/v1/runs/nope/artifacts", notFound),
		get("/api/v1/runs/"+runID+"/artifacts/workspace/out.txt", notFound),
		exchange{method: "DELETE", target: "/api/v1/runs/nope", status: notFound},
		exchange{method: "DELETE", target: "/api/v1/runs/" + runID, status: noContent},
		// Removed, it is gone from every route, as a run never made.
		exchange{method: "DELETE", target: "/api/v1/runs/" + runID, status: notFound},
		get("/api/v1/runs/"+runID, notFound),
		exchange{method: "POST", target: "/api/v1/runs/" + runID + "/cancel", status: notFound},
		get("/api/v1/runs/"+runID+"/events", notFound),
		get("/api/v1/runs/"+runID+"/logs", notFound),
		get("/api/v1/runs/"+runID+"/artifacts", notFound),
		get("/api/v1/runs/"+runID+"/artifacts/workspace/out.txt", notFound),
	)

	// Prepull.
	held := e.pulls.Hold("busybox:1")
	resp = e.do(t, post("/api/v1/images/prepull", `{"image":"busybox:1","timeout":60}`, accepted))
	heldID := decodeInto[api.PrepullTask](t, resp).ID
	select {
	case <-held.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("the held prepull never started")
	}
	resp = e.do(t, post("/api/v1/images/prepull", `{"image":"python:3.12"}`, accepted))
	doneID := decodeInto[api.PrepullTask](t, resp).ID
	waitFor(t, e.h, e.key, "/api/v1/images/prepull/"+doneID, func(b []byte) bool {
		var task api.PrepullTask
		return json.Unmarshal(b, &task) == nil && task.Status == api.PrepullCompleted
	})
	run(
		post("/api/v1/images/prepull", `{"image":" busybox:1 "}`, conflict),
		invalid(post("/api/v1/images/prepull", `{}`, bad)),
		invalid(post("/api/v1/images/prepull", `{"image":"x","timeout":-1}`, bad)),
		unchecked(post("/api/v1/images/prepull", `{"image":"Not A Ref!"}`, bad)),
		get("/api/v1/images/prepull", ok),
		get("/api/v1/images/prepull?status=pulling&image=busybox:1", ok),
		invalid(get("/api/v1/images/prepull?status=sideways", bad)),
		get("/api/v1/images/prepull?limit=1&order=asc", ok),
		invalid(get("/api/v1/images/prepull?limit=1001", bad)),
		get("/api/v1/images/prepull/"+heldID, ok),
		get("/api/v1/images/prepull/"+doneID, ok),
		get("/api/v1/images/prepull/pp-00000000", notFound),
		exchange{method: "POST", target: "/api/v1/templates/plain/prepull", status: accepted},
		exchange{method: "POST", target: "/api/v1/templates/nope/prepull", status: notFound},
		exchange{method: "DELETE", target: "/api/v1/images/prepull/" + heldID, status: noContent},
		exchange{method: "DELETE", target: "/api/v1/images/prepull/" + heldID, status: notFound},
	)

	// The LLM proxy's archive.
	llmID := e.llm.call(t, "sb-llm", "run-1", "a", true, "hi")
	e.llm.call(t, "sb-llm", "run-1", "a", false, "hi", "ok", "again")
	run(
		get("/api/v1/llm/exchanges", ok),
		get("/api/v1/llm/exchanges?sandbox=sb-llm&run=run-1&model=a&status=2xx&limit=1", ok),
		get("/api/v1/llm/exchanges?since=2026-01-01T00:00:00Z&until=2999-01-01T00:00:00Z&status=complete", ok),
		unchecked(get("/api/v1/llm/exchanges?status=banana", bad)),
		invalid(get("/api/v1/llm/exchanges?limit=0", bad)),
		get("/api/v1/llm/exchanges?limit=1&order=desc", ok),
		invalid(get("/api/v1/llm/exchanges?order=newest", bad)),
		invalid(get("/api/v1/llm/exchanges?since=yesterday", bad)),
		get("/api/v1/llm/exchanges/"+llmID, ok),
		get("/api/v1/llm/exchanges/"+llmID+"?raw=request", ok),
		invalid(get("/api/v1/llm/exchanges/"+llmID+"?raw=everything", bad)),
		get("/api/v1/llm/exchanges/llx_unknown", notFound),
		get("/api/v1/llm/exchanges/export?sandbox=sb-llm", ok),
		exchange{method: "GET", target: "/api/v1/llm/exchanges/stream?last=5&sandbox=sb-llm", status: ok, leave: 300 * time.Millisecond},
		exchange{method: "GET", target: "/api/v1/llm/exchanges/stream", header: map[string]string{"Last-Event-ID": "0"},
			status: ok, leave: 300 * time.Millisecond},
		invalid(get("/api/v1/llm/exchanges/stream?last=-1", bad)),
		unchecked(get("/api/v1/llm/exchanges/stream?status=in_progress", bad)),
		unchecked(get("/api/v1/llm/exchanges/stream?after=x", bad)),
		unchecked(get("/api/v1/llm/exchanges/export?status=banana", bad)),
		get("/api/v1/sandboxes/sb-llm/conversations", ok),
	)

	// Deletes last.
	run(
		exchange{method: "DELETE", target: sbPath, status: noContent},
		exchange{method: "DELETE", target: "/api/v1/templates/imported", status: noContent},
		exchange{method: "DELETE", target: "/api/v1/templates/imported", status: notFound},
	)

	// Every operation the handler serves was exercised. The gateway is
	// package gateway's, which this handler does not serve.
	for key, op := range operations(e.doc) {
		if e.covered[op.OperationID] == 0 && !strings.Contains(key, " "+gatewayPrefix) {
			t.Errorf("%s (%s) was not exercised", key, op.OperationID)
		}
	}
}

// waitFor polls GET target until done accepts the response body.
func waitFor(t *testing.T, h http.Handler, key, target string, done func([]byte) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK && done(rec.Body.Bytes()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still %d %s", target, rec.Code, rec.Body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
