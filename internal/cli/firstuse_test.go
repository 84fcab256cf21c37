package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/testenv"
)

// terminal is a buffer the CLI takes for a terminal when tty is set; it
// is safe for concurrent use.
type terminal struct {
	testenv.Buffer
	tty bool
}

func (t *terminal) isTerminal() bool { return t.tty }

// TestCreateShowsImageProgress creates a sandbox whose image the daemon is
// building: stderr shows the build's progress, as lines or as a bar.
func TestCreateShowsImageProgress(t *testing.T) {
	const header = "waiting for image building/ci, which the daemon is preparing (its first use builds or pulls it)\n"
	tests := []struct {
		name  string
		image string
		tty   bool
		want  string
	}{
		{name: "lines", image: "building/ci", want: header +
			"build I: running apt-get update...\n" +
			"build Setting up python3 (3.11.2-1+b1)\n" +
			"unpack sha256:layer [>               ] 0 B/2.0 MiB   0%\n" +
			"unpack sha256:layer [================] 2.0 MiB/2.0 MiB 100%\n" +
			"done building/ci\n"},
		{name: "bar on a terminal", image: "building/ci", tty: true, want: header +
			"\rbuild I: running apt-get update...\n" +
			"\rbuild Setting up python3 (3.11.2-1+b1)\n" +
			"\runpack sha256:layer [>               ] 0 B/2.0 MiB   0%" +
			"\runpack sha256:layer [================] 2.0 MiB/2.0 MiB 100%\n" +
			"\rdone building/ci\n"},
		{name: "an image in store shows nothing", image: "ready-image", want: ""},
		{name: "nor one neither stored nor in flight", image: "alpine", tty: true, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeDaemon(t)
			d.images = append(d.images, api.Image{Ref: "ready-image", Status: api.ImageReady})
			var stdout bytes.Buffer
			stderr := &terminal{tty: tt.tty}
			cmd, err := execute(t.Context(), env{stdout: &stdout, stderr: stderr}, []string{"sandbox", "create", "--image", tt.image})
			if code := report(stderr, cmd, err); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout.String() != "sb1\n" {
				t.Errorf("stdout %q, want the id", stdout.String())
			}
			if diff := cmp.Diff(tt.want, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShowBuilds shows, while a request runs, the build the daemon has in
// flight, as a context's or a session's first request does.
func TestShowBuilds(t *testing.T) {
	d := newFakeDaemon(t)
	d.images = append(d.images, api.Image{Ref: "alpine", Status: api.ImageReady},
		api.Image{Ref: "building/ci", Status: api.ImageBuilding, Progress: &api.ImageProgress{Phase: "build"}})
	defer func(old time.Duration) { buildsDelay = old }(buildsDelay)
	buildsDelay = 0
	cl, err := client.New(os.Getenv(client.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	stderr := &terminal{}
	stop := showBuilds(t.Context(), env{stderr: stderr}, cl)
	for deadline := time.Now().Add(10 * time.Second); !strings.HasSuffix(stderr.String(), "done building/ci\n"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr after 10s: %q", stderr)
		}
	}
	stop()
	if got := stderr.String(); !strings.HasPrefix(got, "waiting for image building/ci, which") || strings.Contains(got, "alpine") {
		t.Errorf("stderr %q, want the build of building/ci alone", got)
	}
}

// TestImageListStates shows images not stored: being built with their
// progress, failed, not built yet.
func TestImageListStates(t *testing.T) {
	d := newFakeDaemon(t)
	d.images = []api.Image{
		{Ref: "agent2env/code-interpreter:latest", Status: api.ImageBuilding,
			Progress: &api.ImageProgress{Phase: "unpack", Item: "sha256:0123456789abcdef", Current: 1 << 20, Total: 4 << 20}},
		{Ref: "agent2env/node:latest", Status: api.ImageFailed, Error: "build image agent2env/node:latest: mmdebstrap: exit status 1"},
		{Ref: "agent2env/python:latest", Status: api.ImageMissing},
		{Ref: "agent2env/agent:latest", Status: api.ImageBuilding, Progress: &api.ImageProgress{Phase: "build", Item: "Setting up git"}},
		{Ref: "docker.io/library/alpine:3.20", ID: "sha256:0123456789abcdef0123", Size: 3 << 20, Layers: 1,
			Created: time.Now().Add(-time.Hour), Status: api.ImageReady},
	}
	check(t, []string{"image", "ls"}, result{Stdout: "" +
		"REF                                 ID             SIZE      LAYERS   CREATED   STATUS\n" +
		"agent2env/code-interpreter:latest   -              -         -        -         building: unpack 25%\n" +
		"agent2env/node:latest               -              -         -        -         failed: build image agent2env/node:latest: mmdebstrap: exit status 1\n" +
		"agent2env/python:latest             -              -         -        -         not built yet\n" +
		"agent2env/agent:latest              -              -         -        -         building: Setting up git\n" +
		"docker.io/library/alpine:3.20       0123456789ab   3.0 MiB   1        1h        ready\n"})
}
