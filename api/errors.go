package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Error is the body of every error response: Error is the message, Code a
// stable machine-readable code. Details are further fields some errors
// carry (a limit's current usage, a suggestion); they travel beside the
// two in the same JSON object, {"error": ..., "code": ..., "limit": 3}, and
// are nil when there are none. Details cannot replace "error" or "code".
type Error struct {
	Message string         `json:"error"`
	Code    string         `json:"code"`
	Details map[string]any `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errorBody is Error's two fixed fields, marshaled by encoding/json.
type errorBody struct {
	Message string `json:"error"`
	Code    string `json:"code"`
}

// MarshalJSON writes the message and code, then the details in key order.
func (e Error) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(errorBody{Message: e.Message, Code: e.Code})
	if err != nil || len(e.Details) == 0 {
		return b, err
	}
	buf := bytes.NewBuffer(b[:len(b)-1]) // without the closing brace
	for _, k := range slices.Sorted(maps.Keys(e.Details)) {
		if reserved(k) {
			continue
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Details[k])
		if err != nil {
			return nil, err
		}
		buf.WriteByte(',')
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads the message and code, and any other field into
// Details.
func (e *Error) UnmarshalJSON(b []byte) error {
	var body errorBody
	if err := json.Unmarshal(b, &body); err != nil {
		return err
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	maps.DeleteFunc(fields, func(k string, _ any) bool { return reserved(k) })
	if len(fields) == 0 {
		fields = nil
	}
	*e = Error{Message: body.Message, Code: body.Code, Details: fields}
	return nil
}

// reserved reports whether k names one of the fixed fields, as
// encoding/json matches them (without regard to case).
func reserved(k string) bool { return strings.EqualFold(k, "error") || strings.EqualFold(k, "code") }

// Error codes. Each maps to one HTTP status; resource-specific codes refine
// the generic ones of the same status.
const (
	CodeInvalidRequest       = "INVALID_REQUEST"       // 400
	CodeUnauthorized         = "UNAUTHORIZED"          // 401
	CodeForbidden            = "FORBIDDEN"             // 403
	CodeNotFound             = "NOT_FOUND"             // 404
	CodeSandboxNotFound      = "SANDBOX_NOT_FOUND"     // 404
	CodeImageNotFound        = "IMAGE_NOT_FOUND"       // 404
	CodeFileNotFound         = "FILE_NOT_FOUND"        // 404
	CodeTemplateNotFound     = "TEMPLATE_NOT_FOUND"    // 404
	CodeSessionNotFound      = "SESSION_NOT_FOUND"     // 404
	CodeAlreadyExists        = "ALREADY_EXISTS"        // 409
	CodeConflict             = "CONFLICT"              // 409
	CodeSandboxNotReady      = "SANDBOX_NOT_READY"     // 409
	CodeTooLarge             = "PAYLOAD_TOO_LARGE"     // 413
	CodeLimitExceeded        = "RESOURCE_LIMIT"        // 429
	CodeNoSpace              = "NO_SPACE"              // 507
	CodeInsufficientCapacity = "INSUFFICIENT_CAPACITY" // 507: the host cannot fit it now
	CodeInternal             = "INTERNAL"              // 500
	CodeNotImplemented       = "NOT_IMPLEMENTED"       // 501
	CodeUnavailable          = "UNAVAILABLE"           // 503
	CodeTimeout              = "TIMEOUT"               // 504
)

// Codes of requests refused before they reach their operation.
const (
	// CodeUnsupportedMediaType: the body's Content-Type is not one the
	// operation takes.
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE" // 415
	// CodeMisdirected: the Host header names none of the daemon's
	// addresses (DNS rebinding protection).
	CodeMisdirected = "MISDIRECTED_REQUEST" // 421
)

// codes is the one table of wire codes: the HTTP status each stands for
// and the generic code of its class. The generic codes name the error
// classes: INVALID_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND,
// ALREADY_EXISTS, CONFLICT (a failed precondition), RESOURCE_LIMIT,
// INTERNAL, NOT_IMPLEMENTED, UNAVAILABLE and TIMEOUT. The daemon answers
// with these statuses and the Go client maps the codes back to classes.
var codes = map[string]struct {
	status int
	class  string
}{
	CodeInvalidRequest:  {http.StatusBadRequest, CodeInvalidRequest},
	CodeInvalidYAML:     {http.StatusBadRequest, CodeInvalidRequest},
	CodeInvalidLanguage: {http.StatusBadRequest, CodeInvalidRequest},
	CodeLanguageMissing: {http.StatusBadRequest, CodeInvalidRequest},

	CodeUnsupportedMediaType: {http.StatusUnsupportedMediaType, CodeInvalidRequest},
	CodeMisdirected:          {http.StatusMisdirectedRequest, CodeInvalidRequest},

	CodeUnauthorized: {http.StatusUnauthorized, CodeUnauthorized},
	CodeForbidden:    {http.StatusForbidden, CodeForbidden},

	CodeNotFound:         {http.StatusNotFound, CodeNotFound},
	CodeSandboxNotFound:  {http.StatusNotFound, CodeNotFound},
	CodeImageNotFound:    {http.StatusNotFound, CodeNotFound},
	CodeFileNotFound:     {http.StatusNotFound, CodeNotFound},
	CodeTemplateNotFound: {http.StatusNotFound, CodeNotFound},
	CodeSessionNotFound:  {http.StatusNotFound, CodeNotFound},
	CodeVersionNotFound:  {http.StatusNotFound, CodeNotFound},
	CodePrepullNotFound:  {http.StatusNotFound, CodeNotFound},
	CodeContextNotFound:  {http.StatusNotFound, CodeNotFound},

	CodeAlreadyExists:     {http.StatusConflict, CodeAlreadyExists},
	CodeTemplateExists:    {http.StatusConflict, CodeAlreadyExists},
	CodePrepullInProgress: {http.StatusConflict, CodeAlreadyExists},
	CodeConflict:          {http.StatusConflict, CodeConflict},
	CodeSandboxNotReady:   {http.StatusConflict, CodeConflict},
	CodeTerminalTakenOver: {http.StatusConflict, CodeConflict},

	CodeTooLarge:             {http.StatusRequestEntityTooLarge, CodeLimitExceeded},
	CodeLimitExceeded:        {http.StatusTooManyRequests, CodeLimitExceeded},
	CodeNoSpace:              {http.StatusInsufficientStorage, CodeLimitExceeded},
	CodeInsufficientCapacity: {http.StatusInsufficientStorage, CodeLimitExceeded},

	CodeInternal:       {http.StatusInternalServerError, CodeInternal},
	CodeNotImplemented: {http.StatusNotImplemented, CodeNotImplemented},
	CodeUnavailable:    {http.StatusServiceUnavailable, CodeUnavailable},
	CodeTimeout:        {http.StatusGatewayTimeout, CodeTimeout},
}

// CodeStatus returns the HTTP status of code, or 0 for a code this version
// does not know.
func CodeStatus(code string) int { return codes[code].status }

// CodeClass returns the generic code of code's class (CodeNotFound for
// CodeSandboxNotFound, CodeConflict for CodeSandboxNotReady), or "" for a
// code this version does not know.
func CodeClass(code string) string { return codes[code].class }
