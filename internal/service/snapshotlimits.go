package service

import (
	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/quantity"
)

// SnapshotLimit reports whether value, a quantity of resource "cpu" or
// "memory", equals snapshot snap's in value ("1" and "1000m", "2Gi" and
// "2048Mi"): what a surface whose clients send resource limits on every
// create checks before making a sandbox from snap, which has snap's
// resources. Another resource, or a value that does not parse, is false.
func SnapshotLimit(snap *api.Snapshot, resource, value string) bool {
	var parse func(string) (int64, error)
	var have string
	switch resource {
	case "cpu":
		parse, have = quantity.ParseCPU, snap.CPU
	case "memory":
		parse, have = quantity.ParseBytes, snap.Memory
	default:
		return false
	}
	a, errA := parse(value)
	b, errB := parse(have)
	return errA == nil && errB == nil && a == b
}
