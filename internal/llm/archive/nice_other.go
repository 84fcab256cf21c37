//go:build !linux

package archive

// lowerPriority does nothing where a thread's priority cannot be set.
func lowerPriority() {}
