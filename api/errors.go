package api

// Error is the body of every error response: Error is the message, Code a
// stable machine-readable code.
type Error struct {
	Message string `json:"error"`
	Code    string `json:"code"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Error codes. Each maps to one HTTP status; resource-specific codes refine
// the generic ones of the same status.
const (
	CodeInvalidRequest   = "INVALID_REQUEST"    // 400
	CodeUnauthorized     = "UNAUTHORIZED"       // 401
	CodeForbidden        = "FORBIDDEN"          // 403
	CodeNotFound         = "NOT_FOUND"          // 404
	CodeSandboxNotFound  = "SANDBOX_NOT_FOUND"  // 404
	CodeImageNotFound    = "IMAGE_NOT_FOUND"    // 404
	CodeFileNotFound     = "FILE_NOT_FOUND"     // 404
	CodeTemplateNotFound = "TEMPLATE_NOT_FOUND" // 404
	CodeSessionNotFound  = "SESSION_NOT_FOUND"  // 404
	CodeAlreadyExists    = "ALREADY_EXISTS"     // 409
	CodeConflict         = "CONFLICT"           // 409
	CodeSandboxNotReady  = "SANDBOX_NOT_READY"  // 409
	CodeTooLarge         = "PAYLOAD_TOO_LARGE"  // 413
	CodeLimitExceeded    = "RESOURCE_LIMIT"     // 429
	CodeNoSpace          = "NO_SPACE"           // 507
	// CodeInsufficientCapacity: the host's cpu or memory is committed.
	CodeInsufficientCapacity = "INSUFFICIENT_CAPACITY" // 507
	CodeInternal             = "INTERNAL"              // 500
	CodeNotImplemented       = "NOT_IMPLEMENTED"       // 501
	CodeUnavailable          = "UNAVAILABLE"           // 503
	CodeTimeout              = "TIMEOUT"               // 504
)
