package prepull

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/image"
)

// fakeNodes reports the steps of a prepull over three nodes.
type fakeNodes struct {
	steps [][2]int
	err   error
}

func (f fakeNodes) Prepull(_ context.Context, _ string, progress func(ready, total int)) error {
	for _, s := range f.steps {
		progress(s[0], s[1])
	}
	return f.err
}

func TestNodeImages(t *testing.T) {
	var tr tracker
	var seen [][2]int
	_, err := NodeImages(fakeNodes{steps: [][2]int{{0, 3}, {1, 3}, {3, 3}}}).Ensure(context.Background(), "python", func(ev image.Progress) {
		if tr.observe(ev) {
			r, total := tr.progress()
			seen = append(seen, [2]int{r, total})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][2]int{{0, 1}, {0, 2}, {0, 3}, {1, 3}, {2, 3}, {3, 3}}, seen); diff != "" {
		t.Errorf("task progress, ready of total (-want +got):\n%s", diff)
	}
	boom := errors.New("boom")
	if _, err := NodeImages(fakeNodes{err: boom}).Ensure(context.Background(), "python", nil); !errors.Is(err, boom) {
		t.Errorf("Ensure = %v, want the prepull's error", err)
	}
}
