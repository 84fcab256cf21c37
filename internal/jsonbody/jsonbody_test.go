package jsonbody

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type body struct {
		A int `json:"a"`
	}
	tests := []struct {
		name, in string
		strict   bool
		check    func(error) bool
	}{
		{"one value", `{"a":1}`, false, func(err error) bool { return err == nil }},
		{"space after it", "{\"a\":1} \n\t", false, func(err error) bool { return err == nil }},
		{"empty", "", false, func(err error) bool { return errors.Is(err, io.EOF) }},
		{"a stray brace", `{"a":1}}`, false, func(err error) bool { return errors.Is(err, ErrMore) }},
		{"a stray bracket", `{"a":1}]`, false, func(err error) bool { return errors.Is(err, ErrMore) }},
		{"two values", `{"a":1}{"a":2}`, false, func(err error) bool { return errors.Is(err, ErrMore) }},
		{"garbage after it", `{"a":1} x`, false, func(err error) bool { return errors.Is(err, ErrMore) }},
		{"cut short", `{"a":`, false, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"an unknown member, strict", `{"b":1}`, true, func(err error) bool { return err != nil && strings.Contains(err.Error(), `unknown field "b"`) }},
		{"an unknown member", `{"b":1}`, false, func(err error) bool { return err == nil }},
		{"past the limit", `{"a":1}` + strings.Repeat(" ", 64), false, func(err error) bool {
			var tooBig *http.MaxBytesError
			return errors.As(err, &tooBig)
		}},
		{"its value past the limit", `{"a":` + strings.Repeat("1", 64) + `}`, false, func(err error) bool {
			var tooBig *http.MaxBytesError
			return errors.As(err, &tooBig)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.in))
			var v body
			if err := Decode(httptest.NewRecorder(), r, &v, 32, tt.strict); !tt.check(err) {
				t.Errorf("Decode(%q) = %v", tt.in, err)
			}
		})
	}
}

// A value of the wrong kind is named by its member's path and the JSON
// values that fit there, never by Go's types.
func TestExplain(t *testing.T) {
	type body struct {
		A struct {
			B []int `json:"b"`
		} `json:"a"`
		C bool              `json:"c"`
		D float64           `json:"d"`
		E map[string]string `json:"e"`
		U uint8             `json:"u"`
		I int16             `json:"i"`
		S *string           `json:"s"`
		R []byte            `json:"r"`
	}
	for _, tt := range []struct{ in, want string }{
		{`{"a":{"b":["x"]}}`, "a.b must be an integer (got string)"},
		{`{"c":1}`, "c must be true or false (got number)"},
		{`{"d":"x"}`, "d must be a number (got string)"},
		{`{"e":[1]}`, "e must be a JSON object (got array)"},
		{`{"e":{"k":1}}`, "e must be a string (got number)"},
		{`{"u":300}`, "u must be an integer from 0 to 255 (got number 300)"},
		{`{"i":40000}`, "i must be an integer from -32768 to 32767 (got number 40000)"},
		{`{"s":{}}`, "s must be a string (got object)"},
		{`{"r":1}`, "r must be a base64 string (got number)"},
		{`[1]`, "the body must be a JSON object (got array)"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.in))
		var v body
		err := Decode(httptest.NewRecorder(), r, &v, 1<<10, false)
		var ke *KindError
		if !errors.As(err, &ke) || err.Error() != tt.want {
			t.Errorf("Decode(%s) = %v, want %q", tt.in, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "uint8")) {
			t.Errorf("Decode(%s): %v names Go's types", tt.in, err)
		}
	}
}
