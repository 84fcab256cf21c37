// Package filesystemconnect is the Go code protoc-gen-connect-go generates from
// E2B's envd filesystem protocol (../../spec/filesystem/filesystem.proto, Apache-2.0): the
// Connect handler and client of its service. Regenerate it with "make
// envd-proto"; do not edit the .connect.go file.
package filesystemconnect
