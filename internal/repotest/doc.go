// Package repotest holds checks over the whole repository rather than one
// package: every package has a doc comment, every docs/ path the code,
// scripts and pages cite is in the repository, surfaces and the task
// runner import only what internal/service's rule allows (TestLayers),
// and the like. It has no code of its own.
package repotest
