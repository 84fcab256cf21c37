package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
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

func TestRefuse(t *testing.T) {
	all := Capabilities{Persistence: true, StorageClass: true, RuntimeClass: true, MaxVolumeBytes: 1 << 30}
	vol := func(size int64, class string) *Persistence { return &Persistence{SizeBytes: size, StorageClass: class} }
	for _, tc := range []struct {
		name string
		caps Capabilities
		spec Spec
		want string // "" accepted
	}{
		{"nothing asked of none", Capabilities{}, Spec{}, ""},
		{"all honoured", all, Spec{Persistence: vol(1<<30, "fast"), RuntimeClass: "gvisor"}, ""},
		{"no limit of its own", Capabilities{Persistence: true}, Spec{Persistence: vol(1<<50, "")}, ""},
		{"no persistence", Capabilities{StorageClass: true}, Spec{Persistence: vol(1<<20, "")}, "persistence: runtime rt cannot"},
		{"no size", all, Spec{Persistence: vol(0, "")}, "persistence.size 0 is not positive"},
		{"too large", all, Spec{Persistence: vol(1<<30+1, "")}, "persistence.size 1073741825 is more than the 1073741824 bytes runtime rt can give"},
		{"no storage classes", Capabilities{Persistence: true}, Spec{Persistence: vol(1<<20, "fast")}, `persistence.storageClassName "fast": runtime rt has no storage classes`},
		{"no runtime classes", Capabilities{Persistence: true}, Spec{RuntimeClass: "kata"}, `runtimeClassName "kata": runtime rt runs every sandbox`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.caps.Refuse(&tc.spec, "rt")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Refuse = %v, want an invalid argument saying %q", err, tc.want)
			}
		})
	}
}
