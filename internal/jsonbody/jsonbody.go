// Package jsonbody reads the JSON body of an HTTP request as every API
// surface takes it: one value, within a byte limit, with nothing after it
// but space; a value of the wrong kind named by its member's path and the
// JSON it takes (Explain), never by the Go types it decodes into; JSON
// that does not parse named by its line and column and what is wrong
// there in plain words (Locate), never by the decoder's words. Each
// surface says what went wrong in its own protocol's form.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrMore is Decode's error for a body that holds more than its value.
var ErrMore = errors.New("the body holds more than one JSON value")

// Decode reads the JSON value of r's body, of at most limit bytes, into v,
// refusing a member v has no field for when strict. It returns io.EOF for
// an empty body, a *http.MaxBytesError past the limit, ErrMore when
// anything but space follows the value, a *KindError for a member of the
// wrong kind, a *SyntaxError for JSON that does not parse (one cut short
// too), an error naming an unknown member when strict, and the reader's
// error when the body cannot be read.
func Decode(w http.ResponseWriter, r *http.Request, v any, limit int64, strict bool) error {
	// The body is read whole, to say where in it JSON that does not parse
	// goes wrong; the decoder would hold it whole anyway.
	body := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0), limit)+bytes.MinRead))
	if _, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		return err
	}
	return Unmarshal(body.Bytes(), v, "the body", strict)
}

// Unmarshal decodes data, one JSON value, into v as Decode does a body,
// with its errors (whole names the value in them: "the body", "the
// metadata part"), for a value read otherwise.
func Unmarshal(data []byte, v any, whole string, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok && strict {
			return fmt.Errorf("unknown field %s", msg) // not the decoder's "json: "
		}
		return Explain(Locate(err, data), whole)
	}
	// Not dec.More, which takes a stray ']' or '}' for the value's end.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrMore
	}
	return nil
}

// SyntaxError is JSON that does not parse: Line and Column (of
// characters, from 1) say where, Problem what is wrong there, in plain
// words. It wraps the decoder's error.
type SyntaxError struct {
	Line, Column int
	Problem      string
	err          error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Problem)
}

// Unwrap returns the decoder's error.
func (e *SyntaxError) Unwrap() error { return e.err }

// Locate returns err, an error of encoding/json's decoding of data (a
// *json.SyntaxError, or io.ErrUnexpectedEOF from a json.Decoder), as a
// *SyntaxError that says where in data and what went wrong; any other
// error as it is.
func Locate(err error, data []byte) error {
	se := (*json.SyntaxError)(nil)
	isSyntax := errors.As(err, &se)
	switch {
	case isSyntax && se.Offset > 0 && se.Offset <= int64(len(data)) && strings.HasPrefix(se.Error(), "invalid character "):
		at := int(se.Offset) - 1 // the offending byte
		line, col := position(data, at)
		r, _ := utf8.DecodeRune(data[at:])
		return &SyntaxError{Line: line, Column: col, Problem: "unexpected " + quote(r) + where(se.Error()), err: err}
	case isSyntax && se.Offset >= int64(len(data)), errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(data, len(data))
		return &SyntaxError{Line: line, Column: col, Problem: "the JSON value is cut short: it ends before it is complete", err: err}
	}
	return err
}

// quote quotes r in double quotes, or a double quote in single ones (not
// "\"").
func quote(r rune) string {
	if r == '"' {
		return `'"'`
	}
	return strconv.Quote(string(r))
}

// position returns the line and column, from 1, of byte at of data.
func position(data []byte, at int) (line, col int) {
	before := data[:at]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte{'\n'}) + 1, utf8.RuneCount(before[start:]) + 1
}

// where says, after the character a decoder's syntax error names, where
// it was and what should have been there, from the context the error
// gives ("invalid character 'x' looking for beginning of value").
func where(msg string) string {
	for _, c := range contexts {
		if strings.HasSuffix(msg, " "+c.decoder) {
			return " " + c.plain
		}
	}
	if i := strings.Index(msg, " in literal "); i >= 0 {
		word, _, _ := strings.Cut(msg[i+len(" in literal "):], " ")
		return " in what should be " + word
	}
	return ""
}

// contexts are the places encoding/json's syntax errors name, in plain
// words; where reads them in order.
var contexts = []struct{ decoder, plain string }{
	{"looking for beginning of value", "where a value should start"},
	{"looking for beginning of object key string", "where a member's name, a string in double quotes, should start"},
	{"after object key", "after a member's name, where ':' should be"},
	{"after object key:value pair", "after a member, where ',' or '}' should be"},
	{"after array element", "after an array element, where ',' or ']' should be"},
	{"after top-level value", "after the JSON value"},
	{"in string literal", "in a string, where control characters must be escaped"},
	{"in string escape code", `in a string's escape, where '\' must be followed by one of " \ / b f n r t u`},
	{`in \u hexadecimal character escape`, `in a string's \u escape, where 4 hexadecimal digits should be`},
	{"after decimal point in numeric literal", "in a number, where a digit should follow the decimal point"},
	{"in numeric literal", "in a number"}, // after the one above, which ends as it does
	{"in exponent of numeric literal", "in a number's exponent, where a digit should be"},
}

// KindError is a JSON value of the wrong kind for where it is: Member is
// its path in the whole value (dotted member names; "" for the whole,
// which Whole names), Want the JSON values that fit there, Got what was
// there.
type KindError struct {
	Member, Whole, Want, Got string
	err                      *json.UnmarshalTypeError
}

func (e *KindError) Error() string {
	if e.Member == "" {
		return fmt.Sprintf("%s must be %s (got %s)", e.Whole, e.Want, e.Got)
	}
	return fmt.Sprintf("%s must be %s (got %s)", e.Member, e.Want, e.Got)
}

// Unwrap returns the decoder's error.
func (e *KindError) Unwrap() error { return e.err }

// Explain returns err, an error of encoding/json's decoding, as a
// *KindError when a value did not fit the Go type it was decoded into, so
// that a client reads the names of its own request (whole names the
// whole value: "the body", "a frame"), not those of Go's types; any other
// error as it is.
func Explain(err error, whole string) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	return &KindError{Member: te.Field, Whole: whole, Want: jsonKind(te.Type), Got: te.Value, err: te}
}

// jsonKind says which JSON values decode into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return fmt.Sprintf("an integer from %d to %d", -1<<(t.Bits()-1), 1<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a JSON array"
	case reflect.Array:
		return "a JSON array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "another JSON value"
}
