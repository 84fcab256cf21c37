package buildinfo

import (
	"runtime"
	"testing"
)

func TestGet(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3", "abc123"
	got := Get()
	if got.Version != "v1.2.3" || got.Commit != "abc123" {
		t.Errorf("Get() = %+v, want the stamped version and commit", got)
	}
	if got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get() = %+v, want this toolchain and platform", got)
	}
	version, commit = "", ""
	if got := Get(); got.Version == "" {
		t.Error("Get() without a stamp has no version; want the module's or \"unknown\"")
	}
}
