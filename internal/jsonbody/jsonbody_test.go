package jsonbody

import (
	"encoding/json"
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

// JSON that does not parse is named by its line and column (of
// characters, from 1) and what is wrong there in plain words, never by
// the decoder's.
func TestSyntax(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":x}`, `line 1, column 6: unexpected "x" where a value should start`},
		{"{\n  \"a\": 1,\n  \"b\": x\n}", `line 3, column 8: unexpected "x" where a value should start`},
		{"{\"é\": \"ü\" x}", `line 1, column 11: unexpected "x" after a member, where ',' or '}' should be`},
		{`{"a":1,}`, `line 1, column 8: unexpected "}" where a member's name, a string in double quotes, should start`},
		{`{"a":1 "b":[]}`, `line 1, column 8: unexpected '"' after a member, where ',' or '}' should be`},
		{`{a:1}`, `line 1, column 2: unexpected "a" where a member's name, a string in double quotes, should start`},
		{`{"a" 1}`, `line 1, column 6: unexpected "1" after a member's name, where ':' should be`},
		{`{"b":[1 2]}`, `line 1, column 9: unexpected "2" after an array element, where ',' or ']' should be`},
		{`{"a":tru}`, `line 1, column 9: unexpected "}" in what should be true`},
		{"{\"s\":\"\x01\"}", `line 1, column 7: unexpected "\x01" in a string, where control characters must be escaped`},
		{`{"s":"\q"}`, `line 1, column 8: unexpected "q" in a string's escape, where '\' must be followed by one of " \ / b f n r t u`},
		{`{"s":"\u12x4"}`, `line 1, column 11: unexpected "x" in a string's \u escape, where 4 hexadecimal digits should be`},
		{`{"a":1.e}`, `line 1, column 8: unexpected "e" in a number, where a digit should follow the decimal point`},
		{`{"a":1e}`, `line 1, column 8: unexpected "}" in a number's exponent, where a digit should be`},
		{`{"a":-}`, `line 1, column 7: unexpected "}" in a number`},
		{`{"a":é}`, `line 1, column 6: unexpected "é" where a value should start`},
		{"{\"a\":\n", `line 2, column 1: the JSON value is cut short: it ends before it is complete`},
		{`{"s":"abc`, `line 1, column 10: the JSON value is cut short: it ends before it is complete`},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.in))
		var v struct {
			A int    `json:"a"`
			B []int  `json:"b"`
			S string `json:"s"`
		}
		err := Decode(httptest.NewRecorder(), r, &v, 1<<10, false)
		var se *SyntaxError
		if !errors.As(err, &se) || err.Error() != tt.want {
			t.Errorf("Decode(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// Locate names a syntax error in data decoded otherwise (json.Unmarshal,
// whose errors differ from a Decoder's), and leaves other errors be.
func TestLocate(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"[1,\n x]", `line 2, column 2: unexpected "x" where a value should start`},
		{`[1] x`, `line 1, column 5: unexpected "x" after the JSON value`},
		{`[1,`, `line 1, column 4: the JSON value is cut short: it ends before it is complete`},
		{`"x"`, `the body must be a JSON array (got string)`},
	} {
		var v []int
		err := Explain(Locate(json.Unmarshal([]byte(tt.in), &v), []byte(tt.in)), "the body")
		if err == nil || err.Error() != tt.want {
			t.Errorf("Unmarshal(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
	if err := errors.New("other"); Locate(err, nil) != err {
		t.Error("Locate changed an error that is no syntax error")
	}
}
