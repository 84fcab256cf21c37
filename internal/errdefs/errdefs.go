// Package errdefs defines the error classes shared by every agent2env package.
//
// Errors are wrapped with %w where they arise and classified once, at the
// edge (the HTTP layer maps a class to a status code and a wire error code),
// in the manner of containerd's errdefs.
package errdefs

import (
	"errors"
	"fmt"
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
