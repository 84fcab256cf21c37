// Package jsonbody reads the JSON body of an HTTP request as every API
// surface takes it: one value, within a byte limit, with nothing after it
// but space. Each surface says what went wrong in its own protocol's form.
package jsonbody

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// ErrMore is Decode's error for a body that holds more than its value.
var ErrMore = errors.New("the body holds more than one JSON value")

// Decode reads the JSON value of r's body, of at most limit bytes, into v,
// refusing a member v has no field for when strict. It returns io.EOF for
// an empty body, a *http.MaxBytesError past the limit, ErrMore when
// anything but space follows the value, and the decoder's error for any
// other body.
func Decode(w http.ResponseWriter, r *http.Request, v any, limit int64, strict bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
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
