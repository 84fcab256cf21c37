package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agent2env/agent2env/api"
)

// Error classes. An *APIError matches (errors.Is) the class of its wire
// code, one class per error class of the daemon, or of its HTTP status when
// the code is unknown (a newer daemon's code, a proxy's error page). An
// argument the client refuses before sending a request (an empty id)
// matches ErrInvalidArgument.
var (
	// ErrInvalidArgument: 400, the request was invalid.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnauthenticated: 401, the token is missing or wrong.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: 403, the token is not allowed to do this.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrNotFound: 404, the sandbox, image, file or route does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: 409, it already exists (ALREADY_EXISTS,
	// TEMPLATE_EXISTS, PREPULL_IN_PROGRESS).
	ErrAlreadyExists = errors.New("already exists")
	// ErrFailedPrecondition: 409, it is not in a state that allows the
	// operation, such as a sandbox that is not running yet (CONFLICT,
	// SANDBOX_NOT_READY).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrResourceExhausted: 413, 429 or 507, a size, count, space or
	// capacity limit was reached; APIError.Details may say how far.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrInternal: 500, the daemon failed.
	ErrInternal = errors.New("internal error")
	// ErrNotImplemented: 501, the daemon does not offer the feature.
	ErrNotImplemented = errors.New("not implemented")
	// ErrUnavailable: 502, 503 or 504, the daemon or something it depends
	// on cannot serve now or timed out; retrying later may succeed. It
	// matches ErrDeadlineExceeded errors too, as it did before that class.
	ErrUnavailable = errors.New("unavailable")
	// ErrDeadlineExceeded: 504, something took longer than allowed.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
)

// Former names and broader classes, kept for existing callers.
var (
	// ErrBadRequest is ErrInvalidArgument.
	ErrBadRequest = ErrInvalidArgument
	// ErrLimit is ErrResourceExhausted.
	ErrLimit = ErrResourceExhausted
	// ErrUnauthorized matches both ErrUnauthenticated and
	// ErrPermissionDenied errors (401 or 403).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrConflict matches every 409: ErrAlreadyExists and
	// ErrFailedPrecondition errors, and a 409 of an unknown code.
	ErrConflict = errors.New("conflict")
)

// classes maps the generic code of each class (api.CodeClass) to the
// client's class.
var classes = map[string]error{
	api.CodeInvalidRequest: ErrInvalidArgument,
	api.CodeUnauthorized:   ErrUnauthenticated,
	api.CodeForbidden:      ErrPermissionDenied,
	api.CodeNotFound:       ErrNotFound,
	api.CodeAlreadyExists:  ErrAlreadyExists,
	api.CodeConflict:       ErrFailedPrecondition,
	api.CodeLimitExceeded:  ErrResourceExhausted,
	api.CodeInternal:       ErrInternal,
	api.CodeNotImplemented: ErrNotImplemented,
	api.CodeUnavailable:    ErrUnavailable,
	api.CodeTimeout:        ErrDeadlineExceeded,
}

// statusClasses is the class of a status, for errors without a known
// code. A 409 has none: it may be either of two.
var statusClasses = map[int]error{
	http.StatusBadRequest:            ErrInvalidArgument,
	http.StatusUnauthorized:          ErrUnauthenticated,
	http.StatusForbidden:             ErrPermissionDenied,
	http.StatusNotFound:              ErrNotFound,
	http.StatusRequestEntityTooLarge: ErrResourceExhausted,
	http.StatusTooManyRequests:       ErrResourceExhausted,
	http.StatusInsufficientStorage:   ErrResourceExhausted,
	http.StatusInternalServerError:   ErrInternal,
	http.StatusNotImplemented:        ErrNotImplemented,
	http.StatusBadGateway:            ErrUnavailable,
	http.StatusServiceUnavailable:    ErrUnavailable,
	http.StatusGatewayTimeout:        ErrDeadlineExceeded,
}

// APIError is an error response of the daemon.
type APIError struct {
	// StatusCode is the HTTP status. For an error reported inside an event
	// stream, whose response was 200, it is the status Code stands for
	// (0 when the code is unknown).
	StatusCode int
	// Code is the machine-readable api.Code* value; empty when the body was
	// not an api.Error (a proxy's error page, say).
	Code string
	// Message is the server's message, or the start of a non-JSON body.
	Message string
	// Details are the body's fields beyond error and code, such as a
	// limit's current usage; nil when there are none.
	Details map[string]any
}

func (e *APIError) Error() string {
	var details []string
	if e.Code != "" {
		details = append(details, e.Code)
	}
	if e.StatusCode != 0 {
		details = append(details, fmt.Sprintf("HTTP %d", e.StatusCode))
	}
	if len(details) == 0 {
		return e.Message
	}
	return e.Message + " (" + strings.Join(details, ", ") + ")"
}

// class returns e's class: that of its code, else that of its status; nil
// when neither is known.
func (e *APIError) class() error {
	if c := api.CodeClass(e.Code); c != "" {
		return classes[c]
	}
	return statusClasses[e.StatusCode]
}

// Is reports whether target is e's class, or one of the broader classes
// that include it (ErrUnauthorized, ErrConflict, ErrUnavailable).
func (e *APIError) Is(target error) bool {
	class := e.class()
	if class != nil && target == class {
		return true
	}
	switch target {
	case ErrUnauthorized:
		return class == ErrUnauthenticated || class == ErrPermissionDenied
	case ErrConflict:
		return class == ErrAlreadyExists || class == ErrFailedPrecondition ||
			class == nil && e.StatusCode == http.StatusConflict
	case ErrUnavailable:
		return class == ErrDeadlineExceeded
	}
	return false
}

// argError is a request the client refuses before sending it, such as
// one with an empty id. It matches ErrInvalidArgument, as the daemon's
// refusal of a bad request does.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

// Is reports whether target is ErrInvalidArgument.
func (e *argError) Is(target error) bool { return target == ErrInvalidArgument }

// invalidf returns an argError of the message format and args make.
func invalidf(format string, args ...any) error {
	return &argError{msg: fmt.Sprintf(format, args...)}
}

// streamError turns the api.Error of an "error" event into an *APIError.
func streamError(data []byte) error {
	var body api.Error
	if err := json.Unmarshal(data, &body); err != nil || body.Message == "" {
		return &APIError{Message: "malformed error event: " + strings.TrimSpace(string(data))}
	}
	return &APIError{StatusCode: api.CodeStatus(body.Code), Code: body.Code, Message: body.Message, Details: body.Details}
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// readError builds the *APIError of a non-2xx response.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body api.Error
	if err := json.Unmarshal(b, &body); err == nil && body.Message != "" {
		return &APIError{StatusCode: resp.StatusCode, Code: body.Code, Message: body.Message, Details: body.Details}
	}
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	} else if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	return &APIError{StatusCode: resp.StatusCode, Message: msg}
}

// SandboxFailedError is returned by WaitForReady when the sandbox reached
// a status it will not leave for running on its own: failed, succeeded,
// terminating, or paused (until it is resumed).
type SandboxFailedError struct {
	// ID is the sandbox's.
	ID string
	// Status is the one it reached.
	Status api.SandboxStatus
	// Reason is the server's explanation, such as why the image could not
	// be pulled.
	Reason string
}

func (e *SandboxFailedError) Error() string {
	msg := fmt.Sprintf("sandbox %s is %s", e.ID, e.Status)
	switch e.Status {
	case api.StatusFailed:
		msg = fmt.Sprintf("sandbox %s failed", e.ID)
	case api.StatusPaused:
		msg = fmt.Sprintf("sandbox %s is paused (resume it to have it run)", e.ID)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// PrepullFailedError is returned by PrepullService.WaitForCompletion when
// the task failed: its pull failed, timed out or was cut short by a
// daemon restart.
type PrepullFailedError struct {
	// TaskID and Image are the failed task's.
	TaskID string
	Image  string
	// Reason is the task's error, such as why the image could not be
	// pulled.
	Reason string
}

func (e *PrepullFailedError) Error() string {
	msg := fmt.Sprintf("prepull task %s failed", e.TaskID)
	if e.Image != "" {
		msg = fmt.Sprintf("prepull task %s of %s failed", e.TaskID, e.Image)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// wrapf wraps err, the failure of an operation the client asked the
// daemon for, with what it was doing (format and args, such as "exec in
// sandbox %s", id), as fmt.Errorf("…: %w") does — unless err's message
// already begins with those words: the daemon says what it was doing too,
// naming its subject as it resolved it (an image's full reference), and
// the same words twice read as two failures. Only the words before a
// trailing %s, the operation without its subject, need match; an
// operation without one matches as whole words ("import images" matches
// "import images from …").
func wrapf(err error, format string, args ...any) error {
	op := fmt.Sprintf(format, args...)
	msg := err.Error()
	verb := strings.TrimSuffix(format, "%s")
	if verb == format || strings.TrimSpace(verb) == "" {
		if rest, ok := strings.CutPrefix(msg, op); ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " ")) {
			return err
		}
	} else if strings.HasPrefix(msg, verb) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
