// Package repotest holds checks over the whole repository rather than one
// package: every package has a doc comment, and the like. It has no code
// of its own.
package repotest
