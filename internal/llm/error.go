package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
)

// ErrorKind classifies an Error the way every wire format can say it.
type ErrorKind string

// The error kinds.
const (
	ErrorInvalidRequest ErrorKind = "invalid_request" // 400
	ErrorAuthentication ErrorKind = "authentication"  // 401
	ErrorPermission     ErrorKind = "permission"      // 403
	ErrorNotFound       ErrorKind = "not_found"       // 404
	ErrorTooLarge       ErrorKind = "too_large"       // 413
	ErrorRateLimit      ErrorKind = "rate_limit"      // 429
	ErrorInternal       ErrorKind = "api_error"       // 500
	ErrorUpstream       ErrorKind = "upstream"        // 502: the upstream failed or broke its protocol
	ErrorOverloaded     ErrorKind = "overloaded"      // 503 (Anthropic: 529)
	ErrorTimeout        ErrorKind = "timeout"         // 504
)

// Error is an error a client sees in its own wire format: each codec's
// EncodeError writes it with Status and the format's name for Kind. It
// matches the errdefs class of its kind with errors.Is.
type Error struct {
	Kind    ErrorKind
	Status  int // HTTP status; 0 means the kind's usual one
	Message string
	// Code is the provider's own error code, if any (e.g.
	// context_length_exceeded), passed on to clients of formats that have one.
	Code string
	// RetryAfter, when not zero, is sent to the client as Retry-After.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// HTTPStatus is the status to answer with.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return kindStatus[e.Kind]
}

// Is makes an Error match its errdefs class.
func (e *Error) Is(target error) bool {
	switch e.Kind {
	case ErrorInvalidRequest, ErrorTooLarge:
		return target == errdefs.ErrInvalidArgument
	case ErrorAuthentication:
		return target == errdefs.ErrUnauthenticated
	case ErrorPermission:
		return target == errdefs.ErrPermissionDenied
	case ErrorNotFound:
		return target == errdefs.ErrNotFound
	case ErrorRateLimit:
		return target == errdefs.ErrResourceExhausted
	case ErrorUpstream, ErrorOverloaded:
		return target == errdefs.ErrUnavailable
	case ErrorTimeout:
		return target == errdefs.ErrDeadlineExceeded
	}
	return false
}

// Retryable reports whether another upstream may succeed where this one
// failed: rate limits, overload, server errors and timeouts, not bad
// requests.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case ErrorRateLimit, ErrorInternal, ErrorUpstream, ErrorOverloaded, ErrorTimeout:
		return true
	}
	return e.HTTPStatus() >= 500
}

var kindStatus = map[ErrorKind]int{
	ErrorInvalidRequest: http.StatusBadRequest,
	ErrorAuthentication: http.StatusUnauthorized,
	ErrorPermission:     http.StatusForbidden,
	ErrorNotFound:       http.StatusNotFound,
	ErrorTooLarge:       http.StatusRequestEntityTooLarge,
	ErrorRateLimit:      http.StatusTooManyRequests,
	ErrorInternal:       http.StatusInternalServerError,
	ErrorUpstream:       http.StatusBadGateway,
	ErrorOverloaded:     http.StatusServiceUnavailable,
	ErrorTimeout:        http.StatusGatewayTimeout,
}

// Errorf returns an *Error of kind with a formatted message.
func Errorf(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an invalid-request *Error: what a decoder returns for bad
// input, a 400 in the client's format.
func Invalid(format string, args ...any) *Error {
	return Errorf(ErrorInvalidRequest, format, args...)
}

// DecodeRequestJSON decodes a client's request body, of the API what
// names ("chat completions"), into v: JSON that does not parse, or a
// member of the wrong kind, is an Invalid error in plain words, with the
// line and column or the member's path (package jsonbody), not in Go's.
func DecodeRequestJSON(body []byte, v any, what string) error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	err = jsonbody.Explain(jsonbody.Locate(err, body), "the body")
	if errors.As(err, new(*jsonbody.SyntaxError)) {
		return Invalid("%s request is not valid JSON: %v", what, err)
	}
	return Invalid("%s request: %v", what, err)
}

// KindOfStatus is the kind an upstream's HTTP status stands for.
func KindOfStatus(status int) ErrorKind {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return ErrorInvalidRequest
	case status == http.StatusUnauthorized:
		return ErrorAuthentication
	case status == http.StatusForbidden:
		return ErrorPermission
	case status == http.StatusNotFound:
		return ErrorNotFound
	case status == http.StatusRequestEntityTooLarge:
		return ErrorTooLarge
	case status == http.StatusTooManyRequests:
		return ErrorRateLimit
	case status == http.StatusServiceUnavailable, status == 529:
		return ErrorOverloaded
	case status == http.StatusGatewayTimeout, status == http.StatusRequestTimeout:
		return ErrorTimeout
	case status >= 500:
		return ErrorInternal
	}
	return ErrorInvalidRequest
}

// AsError returns err as an *Error: itself if it is one, else an internal
// error carrying its message (errdefs classes are mapped to their kinds).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	kind := ErrorInternal
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		kind = ErrorInvalidRequest
	case errors.Is(err, errdefs.ErrUnauthenticated):
		kind = ErrorAuthentication
	case errors.Is(err, errdefs.ErrPermissionDenied):
		kind = ErrorPermission
	case errors.Is(err, errdefs.ErrNotFound):
		kind = ErrorNotFound
	case errors.Is(err, errdefs.ErrResourceExhausted):
		kind = ErrorRateLimit
	case errors.Is(err, errdefs.ErrUnavailable):
		kind = ErrorUpstream
	case errors.Is(err, errdefs.ErrDeadlineExceeded):
		kind = ErrorTimeout
	}
	return &Error{Kind: kind, Message: err.Error()}
}
