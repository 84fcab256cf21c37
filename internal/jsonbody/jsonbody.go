// Package jsonbody reads the JSON body of an HTTP request as every API
// surface takes it: one value, within a byte limit, with nothing after it
// but space, and a value of the wrong kind named by its member's path and
// the JSON it takes (Explain), never by the Go types it decodes into.
// Each surface says what went wrong in its own protocol's form.
package jsonbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
)

// ErrMore is Decode's error for a body that holds more than its value.
var ErrMore = errors.New("the body holds more than one JSON value")

// Decode reads the JSON value of r's body, of at most limit bytes, into v,
// refusing a member v has no field for when strict. It returns io.EOF for
// an empty body, a *http.MaxBytesError past the limit, ErrMore when
// anything but space follows the value, a *KindError for a member of the
// wrong kind, and the decoder's error for any other body.
func Decode(w http.ResponseWriter, r *http.Request, v any, limit int64, strict bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return Explain(err, "the body")
	}
	// Not dec.More, which takes a stray ']' or '}' for the value's end.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return err
		}
		return ErrMore
	}
	return nil
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
