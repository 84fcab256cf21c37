package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// A restored agent's kernels take their new ids, keep their state, and
// draw other random numbers than the state they were saved in would give:
// each language's generator is set to a known state (as every copy of one
// snapshot has it), and after the reseed it no longer gives the known
// sequence.
func TestRestoredRenamesAndReseeds(t *testing.T) {
	c := startKernelAgent(t)
	ctx := context.Background()
	cases := []struct {
		lang, set, draw, reset, check string
	}{
		{LangPython, "import random\nrandom.seed(7)\nx = 41", "print(random.random(), x)", "random.seed(7)", ""},
		{LangBash, "RANDOM=7; x=41", "echo $RANDOM $RANDOM $RANDOM $x", "RANDOM=7", ""},
		// V8 cannot reseed Math.random: it is replaced.
		{LangJavaScript, "var x = 41", "console.log(x)", "", "console.log(String(Math.random).includes('randomInt'), Math.random() < 1)"},
	}
	renames := map[string]string{}
	before := map[string]string{}
	for _, tc := range cases {
		old := "old-" + tc.lang
		renames[old] = "new-" + tc.lang
		newKernel(t, c, old, tc.lang)
		execute(t, c, old, tc.set, 10*time.Second)
		before[tc.lang] = execute(t, c, old, tc.draw, 10*time.Second).stdout
		if tc.reset != "" {
			execute(t, c, old, tc.reset, 10*time.Second)
		}
	}
	if _, err := c.Restored(ctx, RestoredRequest{Kernels: map[string]string{"nope": "x"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Restored renaming an unknown kernel = %v, want not found", err)
	}
	res, err := c.Restored(ctx, RestoredRequest{Kernels: renames})
	if err != nil || len(res.NotReseeded) > 0 {
		t.Fatalf("Restored = %+v, %v", res, err)
	}
	for _, tc := range cases {
		if _, err := c.Execute(ctx, "old-"+tc.lang, KernelExecRequest{Code: "1"}, KernelOutput{}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: the old id after the rename: %v, want not found", tc.lang, err)
		}
		id := "new-" + tc.lang
		after := execute(t, c, id, tc.draw, 10*time.Second).stdout
		if !strings.Contains(after, "41") {
			t.Errorf("%s: %q after the rename, want its variable 41", tc.lang, after)
		}
		if tc.reset != "" && after == before[tc.lang] {
			t.Errorf("%s: drew %q after the reseed, the same as from the saved state", tc.lang, after)
		}
		if tc.check != "" {
			if out := execute(t, c, id, tc.check, 10*time.Second).stdout; out != "true true\n" {
				t.Errorf("%s: %q, want Math.random replaced", tc.lang, out)
			}
		}
	}
}

// A restored agent ends at once the processes that end with their writer
// and have none (the one-shot terminals of the sandbox it was saved from,
// whose clients are that sandbox's); the others go on.
func TestRestoredEndsWriterless(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	oneShot := startProc(t, c, ProcRequest{Command: []string{"sleep", "60"}, EndWithWriter: true})
	attached := startProc(t, c, ProcRequest{Command: []string{"sleep", "60"}, EndWithWriter: true})
	a, err := c.AttachProc(ctx, attached.ID, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	kept := startProc(t, c, ProcRequest{Command: []string{"sleep", "60"}})
	if _, err := c.Restored(ctx, RestoredRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the writerless one-shot process to end", func() bool {
		_, err := c.Proc(ctx, oneShot.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
	for _, id := range []string{attached.ID, kept.ID} {
		if p, err := c.Proc(ctx, id); err != nil || !p.Running {
			t.Errorf("process %s after the restore: %+v, %v; want it running", id, p, err)
		}
	}
}
