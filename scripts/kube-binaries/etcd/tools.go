//go:build tools

// Package tools names the command scripts/kube-binaries.sh builds, so that
// "go mod tidy" keeps every module it needs in go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
