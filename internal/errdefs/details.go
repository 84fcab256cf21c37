package errdefs

import "errors"

// detailed carries fields an error body has beside its message and code.
type detailed struct {
	error
	details map[string]any
}

func (e *detailed) Unwrap() error { return e.error }

// WithDetails returns err with fields for the API's error body, beside
// "error" and "code" (which they never replace): the usage and the
// suggestion of a resource limit, for instance.
func WithDetails(err error, details map[string]any) error {
	if err == nil {
		return nil
	}
	return &detailed{error: err, details: details}
}

// Details returns the fields WithDetails gave err (the outermost), or nil.
func Details(err error) map[string]any {
	var d *detailed
	if errors.As(err, &d) {
		return d.details
	}
	return nil
}
