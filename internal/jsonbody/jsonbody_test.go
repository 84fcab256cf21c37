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
