package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnviron(t *testing.T) {
	const path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, tc := range []struct {
		name          string
		imageEnv, env []string
		want          []string
	}{
		{"defaults", nil, nil, []string{"HOME=" + HomeDir, "LANG=C.UTF-8", path, "USER=sandbox"}},
		{"image over defaults, home kept", []string{"PATH=/opt/bin", "HOME=/root", "NOEQUALS", "A=image"}, nil,
			[]string{"A=image", "HOME=" + HomeDir, "LANG=C.UTF-8", "PATH=/opt/bin", "USER=sandbox"}},
		{"spec over all", []string{"A=image"}, []string{"A=spec", "HOME=/override", "A=later"},
			[]string{"A=later", "HOME=/override", "LANG=C.UTF-8", path, "USER=sandbox"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Environ(tc.imageEnv, tc.env)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
