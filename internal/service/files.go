package service

import "github.com/agent2env/agent2env/internal/manager"

// CleanPath is the path of a file in a sandbox as every file operation
// takes it from a client: a relative path is taken from the sandbox's
// working directory, and one that steps out with ".." or holds NUL is
// ErrInvalidArgument. Surfaces that echo the path back show this form.
func CleanPath(p string) (string, error) { return manager.CleanPath(p) }
