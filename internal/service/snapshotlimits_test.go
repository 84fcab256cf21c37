package service

import (
	"testing"

	"github.com/agent2env/agent2env/api"
)

func TestSnapshotLimit(t *testing.T) {
	snap := &api.Snapshot{CPU: "1", Memory: "2Gi"}
	for _, tc := range []struct {
		resource, value string
		want            bool
	}{
		{"cpu", "1", true},
		{"cpu", "1000m", true},
		{"cpu", "2", false},
		{"cpu", "lots", false},
		{"memory", "2Gi", true},
		{"memory", "2048Mi", true},
		{"memory", "2G", false},
		{"gpu", "1", false},
	} {
		if got := SnapshotLimit(snap, tc.resource, tc.value); got != tc.want {
			t.Errorf("SnapshotLimit(%s %s) = %v, want %v", tc.resource, tc.value, got, tc.want)
		}
	}
}
