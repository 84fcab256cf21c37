// Package errdefs defines the error classes shared by every agent2env
// package, and their one mapping to the wire.
//
// Errors are wrapped with %w where they arise, optionally given a wire code
// (WithCode) and further fields for the error body (WithDetails), and
// classified once, at the edge, in the manner of containerd's errdefs:
// Classify gives the class and wire code for any surface (MCP tool errors,
// CLI messages), HTTPStatus and WriteHTTP the HTTP status and error body.
// The statuses of the wire codes are api.CodeStatus's, the table the Go
// client maps responses back with.
package errdefs

import (
	"errors"
	"fmt"
	"maps"
)

// The error classes. Test with errors.Is.
var (
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrUnavailable        = errors.New("unavailable")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrNotImplemented     = errors.New("not implemented")
)

// Invalid wraps msg as an ErrInvalidArgument.
func Invalid(format string, args ...any) error { return wrap(ErrInvalidArgument, format, args...) }

// NotFound wraps msg as an ErrNotFound.
func NotFound(format string, args ...any) error { return wrap(ErrNotFound, format, args...) }

// Conflict wraps msg as an ErrAlreadyExists.
func Conflict(format string, args ...any) error { return wrap(ErrAlreadyExists, format, args...) }

// Precondition wraps msg as an ErrFailedPrecondition.
func Precondition(format string, args ...any) error {
	return wrap(ErrFailedPrecondition, format, args...)
}

// Unavailable wraps msg as an ErrUnavailable.
func Unavailable(format string, args ...any) error { return wrap(ErrUnavailable, format, args...) }

// NotImplemented wraps msg as an ErrNotImplemented: an operation the
// daemon does not offer.
func NotImplemented(format string, args ...any) error {
	return wrap(ErrNotImplemented, format, args...)
}

// Forbidden wraps msg as an ErrPermissionDenied.
func Forbidden(format string, args ...any) error { return wrap(ErrPermissionDenied, format, args...) }

// classed is an error whose message is its own text but which matches a class.
type classed struct {
	class error
	msg   string
}

func (e *classed) Error() string        { return e.msg }
func (e *classed) Is(target error) bool { return target == e.class }

func wrap(class error, format string, args ...any) error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &classed{class: class, msg: msg}
}

// marked is an error that matches a class besides what it wraps, with
// the wrapped error's message.
type marked struct {
	error
	class error
}

func (e *marked) Unwrap() error        { return e.error }
func (e *marked) Is(target error) bool { return target == e.class }

// Mark makes err match class as well (errors.Is), its message unchanged:
// the class goes to the wire as a status and a code, not as words in the
// message ("unavailable: Get …"). nil stays nil.
func Mark(err, class error) error {
	if err == nil {
		return nil
	}
	return &marked{error: err, class: class}
}

// coded attaches a wire error code to an error.
type coded struct {
	error
	code string
}

func (e *coded) Unwrap() error { return e.error }

// WithCode attaches code, a wire error code such as "SANDBOX_NOT_FOUND",
// to err. The edge reports it instead of the class's generic code.
func WithCode(err error, code string) error {
	if err == nil {
		return nil
	}
	return &coded{error: err, code: code}
}

// Code returns the outermost code attached to err, or "".
func Code(err error) string {
	var c *coded
	if errors.As(err, &c) {
		return c.code
	}
	return ""
}

// detailed attaches fields for the error body to an error.
type detailed struct {
	error
	details map[string]any
}

func (e *detailed) Unwrap() error { return e.error }

// WithDetails attaches details, further fields of the error body such as
// a limit's current usage or a suggestion, to err. They must marshal to
// JSON; keys "error" and "code" are ignored.
func WithDetails(err error, details map[string]any) error {
	if err == nil {
		return nil
	}
	return &detailed{error: err, details: maps.Clone(details)}
}

// Details returns the details attached to err and the errors it wraps,
// merged (an outer error's key wins), or nil.
func Details(err error) map[string]any {
	var out map[string]any
	walk(err, func(err error) {
		d, ok := err.(*detailed)
		if !ok {
			return
		}
		if out == nil {
			out = make(map[string]any, len(d.details))
		}
		for k, v := range d.details {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	})
	return out
}

// walk calls fn for err and every error it wraps, depth first.
func walk(err error, fn func(error)) {
	for err != nil {
		fn(err)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, fn)
			}
			return
		default:
			return
		}
	}
}
