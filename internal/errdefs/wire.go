package errdefs

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agent2env/agent2env/api"
)

// NoSpace marks err, a write that failed because a disk of the host is
// full (the store's ENOSPC, SQLITE_FULL, SQLSTATE 53100), as
// ErrResourceExhausted with the wire code api.CodeNoSpace: 507, not the
// 500 of the daemon's own failure. nil stays nil.
func NoSpace(err error) error {
	if err == nil {
		return nil
	}
	return WithCode(Mark(err, ErrResourceExhausted), api.CodeNoSpace)
}

// IsNoSpace reports whether err is a write refused because a disk of the
// host is full (NoSpace's mark).
func IsNoSpace(err error) bool { return Code(err) == api.CodeNoSpace }

// classes is the one table from error class to its generic wire code,
// whose HTTP status is api.CodeStatus's. The first class err matches
// wins.
var classes = []struct {
	class error
	code  string
}{
	{ErrInvalidArgument, api.CodeInvalidRequest},
	{ErrUnauthenticated, api.CodeUnauthorized},
	{ErrPermissionDenied, api.CodeForbidden},
	{ErrNotFound, api.CodeNotFound},
	{ErrAlreadyExists, api.CodeAlreadyExists},
	{ErrFailedPrecondition, api.CodeConflict},
	{ErrResourceExhausted, api.CodeLimitExceeded},
	{ErrNotImplemented, api.CodeNotImplemented},
	{ErrUnavailable, api.CodeUnavailable},
	{ErrDeadlineExceeded, api.CodeTimeout},
}

// Classify returns err's class (ErrNotFound, ...) and its wire code: the
// code attached with WithCode, else the class's generic code. An error of
// no class is the daemon's own failure: class nil, code api.CodeInternal.
// A body over an http.MaxBytesReader's limit is ErrResourceExhausted,
// api.CodeTooLarge.
func Classify(err error) (class error, code string) {
	class, code, _ = classify(err)
	return class, code
}

// classify is Classify, adding the class's generic code.
func classify(err error) (class error, code, generic string) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return ErrResourceExhausted, api.CodeTooLarge, api.CodeLimitExceeded
	}
	for _, c := range classes {
		if errors.Is(err, c.class) {
			code := Code(err)
			if code == "" {
				code = c.code
			}
			return c.class, code, c.code
		}
	}
	return nil, api.CodeInternal, api.CodeInternal
}

// HTTPStatus returns the HTTP status and wire code of err: the status of
// its code, or of its class when the code is one api does not know.
func HTTPStatus(err error) (status int, code string) {
	_, code, generic := classify(err)
	if status = api.CodeStatus(code); status == 0 {
		status = api.CodeStatus(generic)
	}
	return status, code
}

// Body returns the error body of err: its message, wire code and details.
// Error events of a stream carry it too.
func Body(err error) api.Error {
	_, code := Classify(err)
	return api.Error{Message: err.Error(), Code: code, Details: Details(err)}
}

// WriteHTTP answers with err: its status and JSON error body. Details
// that cannot be marshaled are left out rather than losing the body.
func WriteHTTP(w http.ResponseWriter, err error) {
	status, _ := HTTPStatus(err)
	body := Body(err)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if enc.Encode(body) != nil {
		buf.Reset()
		body.Details = nil
		_ = enc.Encode(body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
