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

// Error classes. An *APIError matches (errors.Is) the class of its HTTP
// status, so callers can branch without knowing every code.
var (
	// ErrBadRequest: 400, the request was invalid.
	ErrBadRequest = errors.New("bad request")
	// ErrUnauthorized: 401 or 403, the token is missing, wrong or not allowed.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound: 404, the sandbox, image, file or route does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: 409, it already exists or is not in a state that allows
	// the operation (such as a sandbox that is not running yet).
	ErrConflict = errors.New("conflict")
	// ErrLimit: 413, 429 or 507, a size, count or space limit was reached.
	ErrLimit = errors.New("limit exceeded")
	// ErrUnavailable: 502, 503 or 504, the daemon or something it depends
	// on cannot serve now or timed out; retrying later may succeed.
	ErrUnavailable = errors.New("unavailable")
)

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

// Is reports whether target is the error class of e's status.
func (e *APIError) Is(target error) bool {
	switch e.StatusCode {
	case http.StatusBadRequest:
		return target == ErrBadRequest
	case http.StatusUnauthorized, http.StatusForbidden:
		return target == ErrUnauthorized
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusConflict:
		return target == ErrConflict
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return target == ErrLimit
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return target == ErrUnavailable
	}
	return false
}

// codeStatus is the HTTP status each wire code stands for, used
// for errors that arrive inside an event stream.
var codeStatus = map[string]int{
	api.CodeInvalidRequest:    http.StatusBadRequest,
	api.CodeUnauthorized:      http.StatusUnauthorized,
	api.CodeForbidden:         http.StatusForbidden,
	api.CodeNotFound:          http.StatusNotFound,
	api.CodeSandboxNotFound:   http.StatusNotFound,
	api.CodeImageNotFound:     http.StatusNotFound,
	api.CodeFileNotFound:      http.StatusNotFound,
	api.CodeTemplateNotFound:  http.StatusNotFound,
	api.CodeVersionNotFound:   http.StatusNotFound,
	api.CodePrepullNotFound:   http.StatusNotFound,
	api.CodeTemplateExists:    http.StatusConflict,
	api.CodePrepullInProgress: http.StatusConflict,
	api.CodeInvalidYAML:       http.StatusBadRequest,
	api.CodeAlreadyExists:     http.StatusConflict,
	api.CodeConflict:          http.StatusConflict,
	api.CodeSandboxNotReady:   http.StatusConflict,
	api.CodeTooLarge:          http.StatusRequestEntityTooLarge,
	api.CodeLimitExceeded:     http.StatusTooManyRequests,
	api.CodeNoSpace:           http.StatusInsufficientStorage,
	api.CodeInternal:          http.StatusInternalServerError,
	api.CodeNotImplemented:    http.StatusNotImplemented,
	api.CodeUnavailable:       http.StatusServiceUnavailable,
	api.CodeTimeout:           http.StatusGatewayTimeout,
	api.CodeContextNotFound:   http.StatusNotFound,
	api.CodeInvalidLanguage:   http.StatusBadRequest,
	api.CodeLanguageMissing:   http.StatusBadRequest,
}

// streamError turns the api.Error of an "error" event into an *APIError.
func streamError(data []byte) error {
	var body api.Error
	if err := json.Unmarshal(data, &body); err != nil || body.Message == "" {
		return &APIError{Message: "malformed error event: " + strings.TrimSpace(string(data))}
	}
	return &APIError{StatusCode: codeStatus[body.Code], Code: body.Code, Message: body.Message}
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// readError builds the *APIError of a non-2xx response.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body api.Error
	if err := json.Unmarshal(b, &body); err == nil && body.Message != "" {
		return &APIError{StatusCode: resp.StatusCode, Code: body.Code, Message: body.Message}
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
// a status it will not leave for running: failed, succeeded or
// terminating.
type SandboxFailedError struct {
	ID     string
	Status api.SandboxStatus
	// Reason is the server's explanation, such as why the image could not
	// be pulled.
	Reason string
}

func (e *SandboxFailedError) Error() string {
	msg := fmt.Sprintf("sandbox %s is %s", e.ID, e.Status)
	if e.Status == api.StatusFailed {
		msg = fmt.Sprintf("sandbox %s failed", e.ID)
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
