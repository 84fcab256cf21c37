package kube

import "testing"

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		control, policed bool
		want             Enforcement
	}{
		{control: true, policed: false, want: PoliciesEnforced},
		{control: true, policed: true, want: PoliciesNotEnforced},
		// Without the control's connection, a refused one proves nothing.
		{control: false, policed: false, want: PoliciesUnknown},
		{control: false, policed: true, want: PoliciesUnknown},
	} {
		if got := verdict(tc.control, tc.policed); got != tc.want {
			t.Errorf("verdict(control reached %v, policed reached %v) = %v, want %v", tc.control, tc.policed, got, tc.want)
		}
	}
}
