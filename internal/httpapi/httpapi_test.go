package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// The agent2env additions' bodies (decodeStrict) refuse a member they do
// not know with a 400 naming it; the LiteBoxd-compatible ones (decode)
// ignore it, as LiteBoxd does.
func TestDecodeUnknownMembers(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		strict bool
		want   string // "": decoded
	}{
		{"strict, known", `{"task":"x","repeats":2}`, true, ""},
		{"strict, misspelt", `{"task":"x","repeat":2}`, true, `unknown field "repeat"`},
		{"strict, nested is the task's own", `{"task":"x","agents":["a"],"bogus":{"a":1}}`, true, `unknown field "bogus"`},
		{"lenient, misspelt", `{"task":"x","repeat":2}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
			var v api.RunSubmitRequest
			var err error
			if tt.strict {
				err = decodeStrict(httptest.NewRecorder(), req, &v, maxJSONBody)
			} else {
				err = decode(httptest.NewRecorder(), req, &v)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("decode: %v", err)
			case tt.want == "" && v.Task != "x":
				t.Errorf("decoded %+v", v)
			case tt.want != "" && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("decode: %v, want ErrInvalidArgument naming %q", err, tt.want)
			}
		})
	}
}

// A body that is not JSON, or whose member has the wrong kind of value,
// is a 400 that says where and what in plain words, with nothing made.
func TestBadJSONBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tt := range []struct{ name, path, body, want string }{
		{"a bare word", "/api/v1/sandboxes", `{"template": python}`,
			`request body is not valid JSON: line 1, column 14: unexpected "p" where a value should start`},
		{"a missing comma, on line 3", "/api/v1/sandboxes", "{\n  \"template\": \"python\"\n  \"overrides\": {}\n}",
			`request body is not valid JSON: line 3, column 3: unexpected '"' after a member, where ',' or '}' should be`},
		{"cut short", "/api/v1/sandboxes", `{"template": "python"`,
			`request body is not valid JSON: line 1, column 22: the JSON value is cut short: it ends before it is complete`},
		{"a number for a string", "/api/v1/sandboxes", `{"template": 1}`, `template must be a string (got number)`},
		{"a string for a number", "/api/v1/sandboxes", `{"template": "t", "overrides": {"ttl": "1h"}}`, `overrides.ttl must be an integer (got string)`},
		{"an array for the body", "/api/v1/sandboxes", `[]`, `the body must be a JSON object (got array)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.postJSON(t, tt.path, tt.body)
			checkError(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
			var body api.Error
			if err := json.Unmarshal(resp.body, &body); err != nil || body.Message != tt.want {
				t.Errorf("error %q, want %q", body.Message, tt.want)
			}
			if strings.Contains(body.Message, "invalid character") || strings.Contains(body.Message, "Go ") {
				t.Errorf("error %q in the decoder's words", body.Message)
			}
		})
	}
	if ids := e.ids(t); len(ids) != 0 {
		t.Errorf("sandboxes made: %v", ids)
	}
}
