package manager

import (
	"slices"
	"testing"

	"github.com/agent2env/agent2env/internal/store"
)

func TestWithReserved(t *testing.T) {
	sb := func(id string) store.SandboxLimits { return store.SandboxLimits{ID: id} }
	for _, tc := range []struct {
		name             string
		stored, reserved []store.SandboxLimits
		want             []string
	}{
		{"none reserved", []store.SandboxLimits{sb("a")}, nil, []string{"a"}},
		{"reserved only", nil, []store.SandboxLimits{sb("b")}, []string{"b"}},
		{"stored meanwhile: counted once", []store.SandboxLimits{sb("a"), sb("b")}, []store.SandboxLimits{sb("b"), sb("c")}, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, s := range withReserved(tc.stored, tc.reserved) {
				ids = append(ids, s.ID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("got %v, want %v", ids, tc.want)
			}
		})
	}
}

func TestReservations(t *testing.T) {
	var r reservations
	sb := &store.Sandbox{ID: "a", CPU: "1"}
	r.add(sb)
	sb.CPU = "2" // the store may change the caller's record; the reservation keeps its own
	if got := r.list(); len(got) != 1 || got[0].CPU != "1" {
		t.Fatalf("list after add: %+v", got)
	}
	r.remove("a")
	if got := r.list(); len(got) != 0 {
		t.Fatalf("list after remove: %+v", got)
	}
}
