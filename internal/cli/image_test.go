package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/google/go-cmp/cmp"
)

func TestImageCommands(t *testing.T) {
	longAgo := time.Now().Add(-72 * time.Hour)
	seed := []api.Image{
		{Ref: "docker.io/library/alpine:3.20", ID: "sha256:0123456789abcdef0123", Size: 3 << 20, Layers: 1, Created: longAgo},
		{Ref: "agent2env/python:latest", ID: "sha256:fedcba", Size: 1536, Layers: 4, Created: longAgo},
	}
	tests := []struct {
		name string
		args []string
		want result
	}{
		{
			name: "ls",
			args: []string{"image", "ls"},
			want: result{Stdout: "" +
				"REF                             ID             SIZE      LAYERS   CREATED   STATUS\n" +
				"docker.io/library/alpine:3.20   0123456789ab   3.0 MiB   1        3d        ready\n" +
				"agent2env/python:latest         fedcba         1.5 KiB   4        3d        ready\n"},
		},
		{
			name: "pull prints progress lines and the ref",
			args: []string{"image", "pull", "busybox"},
			want: result{Stdout: "docker.io/library/busybox\n", Stderr: "" +
				"resolve busybox\n" +
				"download sha256:layer [========>       ] 1.0 MiB/2.0 MiB  50%\n" +
				"download sha256:layer [================] 2.0 MiB/2.0 MiB 100%\n"},
		},
		{
			name: "pull json",
			args: []string{"image", "pull", "--json", "busybox"},
			want: result{Stdout: `{
  "ref": "docker.io/library/busybox",
  "digest": "",
  "id": "sha256:0123456789abcdef",
  "size": 2097152,
  "layers": 1,
  "created": "<time>"
}
`},
		},
		{
			name: "pull fails",
			args: []string{"image", "pull", "missing"},
			want: result{Code: 1, Stderr: "resolve missing\nagent2env image: pull image missing: image missing not found (IMAGE_NOT_FOUND, HTTP 404)\n"},
		},
		{
			name: "build",
			args: []string{"image", "build", "agent2env/node"},
			want: result{Stdout: "docker.io/library/agent2env/node\n", Stderr: "resolve agent2env/node\n"},
		},
		{
			name: "rm",
			args: []string{"image", "rm", "agent2env/python:latest", "nope"},
			want: result{Code: 1, Stdout: "agent2env/python:latest\n", Stderr: "remove image nope: image nope not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeDaemon(t)
			d.images = append(d.images, seed...)
			code, stdout, stderr := run(t, tt.args...)
			got := result{Code: code, Stdout: stripCreated(stdout), Stderr: tt.want.Stderr}
			if !strings.Contains(stderr, tt.want.Stderr) {
				got.Stderr = stderr
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// stripCreated replaces the JSON "created" value of an image.
func stripCreated(s string) string {
	if k, rest, ok := strings.Cut(s, `"created": "`); ok {
		_, after, _ := strings.Cut(rest, `"`)
		return k + `"created": "<time>"` + after
	}
	return s
}

func TestImageImport(t *testing.T) {
	d := newFakeDaemon(t)
	tarball := bytes.Repeat([]byte("layer data "), 50000)
	file := filepath.Join(t.TempDir(), "images.tar")
	if err := os.WriteFile(file, tarball, 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, []string{"image", "import", file}, result{
		Stdout: "imported/one:latest\nimported/two:latest\n",
		Stderr: "upload " + shorten(file, 28) + " [",
	})
	code, stdout, stderr := runIn(t, string(tarball), "image", "import", "--json", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "[\n  {\n    \"ref\": \"imported/one:latest\"") {
		t.Errorf("import --json printed:\n%s", stdout)
	}
	if len(d.imports) != 2 || !bytes.Equal(d.imports[0], tarball) || !bytes.Equal(d.imports[1], tarball) {
		t.Errorf("the daemon did not receive the tarball unchanged")
	}
	check(t, []string{"image", "import", filepath.Join(t.TempDir(), "absent.tar")}, result{Code: 1, Stderr: "no such file"})
}

// image build's help names every built-in image there is.
func TestImageBuildNamesBuiltins(t *testing.T) {
	build, _, err := newRoot(env{}).Find([]string{"image", "build"})
	if err != nil || build.Name() != "build" {
		t.Fatalf("no image build command: %v", err)
	}
	for _, ref := range image.Builtins() {
		if name, _, _ := strings.Cut(ref, ":"); !strings.Contains(build.Short, name) {
			t.Errorf("image build's help %q does not name %s", build.Short, name)
		}
	}
}
