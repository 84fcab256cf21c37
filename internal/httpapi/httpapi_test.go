package httpapi

import (
	"errors"
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
