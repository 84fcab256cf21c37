// Package filesystem is the Go code protoc-gen-go generates from E2B's envd
// filesystem protocol (spec/filesystem/filesystem.proto, Apache-2.0): its messages. Regenerate
// it with "make envd-proto"; do not edit the .pb.go file.
package filesystem
