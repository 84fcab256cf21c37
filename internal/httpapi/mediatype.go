package httpapi

import (
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// bodyTypes knows the media types each operation of api/openapi.yaml
// takes its request body in, found by the same patterns the server
// routes by. The document is the one list: TestOpenAPIRoutes holds it to
// the routes the server registers.
type bodyTypes struct {
	mux   *http.ServeMux
	types map[string][]string // pattern → media types, lower case
}

// documentedBodies is read from the document once.
var documentedBodies = sync.OnceValue(func() *bodyTypes {
	bt, err := parseBodyTypes(api.OpenAPI)
	if err != nil {
		panic("api/openapi.yaml: " + err.Error())
	}
	return bt
})

func parseBodyTypes(doc []byte) (*bodyTypes, error) {
	var d struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	bt := &bodyTypes{mux: http.NewServeMux(), types: map[string][]string{}}
	for path, item := range d.Paths {
		for method, node := range item {
			switch method {
			case "post", "put", "patch", "delete":
			default:
				continue
			}
			var op struct {
				RequestBody *struct {
					Content map[string]yaml.Node `yaml:"content"`
				} `yaml:"requestBody"`
			}
			if err := node.Decode(&op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			if op.RequestBody == nil {
				continue
			}
			var types []string
			for mt := range op.RequestBody.Content {
				types = append(types, strings.ToLower(mt))
			}
			if slices.Contains(types, "*/*") {
				continue // forwarded as is (the port gateway)
			}
			slices.Sort(types)
			pattern := strings.ToUpper(method) + " " + path
			// Through a method value: TestOpenAPIRoutes reads every
			// Handle call in this package as a route of the server.
			register := bt.mux.Handle
			register(pattern, http.NotFoundHandler())
			bt.types[pattern] = types
		}
	}
	return bt, nil
}

// of returns the media types r's operation takes, or nil when it takes no
// body or any.
func (bt *bodyTypes) of(r *http.Request) []string {
	_, pattern := bt.mux.Handler(r)
	return bt.types[pattern]
}

// requireMediaTypes answers 415 to a request whose body comes in a media
// type its operation does not document, before the operation runs. A web
// page may send text/plain, urlencoded and multipart bodies to any origin
// without a CORS preflight; JSON operations take only application/json,
// which a page cannot send elsewhere unasked. A request without a
// Content-Type is refused too unless its body is empty, which the
// operation judges.
func requireMediaTypes(next http.Handler) http.Handler {
	bt := documentedBodies()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if types := bt.of(r); types != nil {
			if msg := mediaTypeRefusal(r, types); msg != "" {
				writeError(w, errdefs.WithCode(errdefs.Invalid("%s", msg), api.CodeUnsupportedMediaType))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// mediaTypeRefusal says why r's body is not in one of types, or "".
func mediaTypeRefusal(r *http.Request, types []string) string {
	want := strings.Join(types, " or ")
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 {
			return ""
		}
		return "request body has no Content-Type: send " + want
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(types, mt) {
		return fmt.Sprintf("content type %q is not accepted here: send %s", ct, want)
	}
	return ""
}
