package prepull

import (
	"context"
	"strconv"

	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// NodeImages returns the Images of a runtime whose nodes pull images
// themselves (the kubernetes runtime): Ensure has every node pull, and a
// task's progress counts nodes (ready of total) as it counts layers for the
// image store. The image store is not involved: Ensure returns no image.
func NodeImages(p sandbox.NodePrepuller) Images { return nodeImages{p} }

type nodeImages struct{ p sandbox.NodePrepuller }

func (n nodeImages) Ensure(ctx context.Context, ref string, progress image.ProgressFunc) (*image.Image, error) {
	report := func(ready, total int) {
		if progress == nil {
			return
		}
		// The tracker counts items seen and items unpacked: one a node.
		for i := range total {
			ev := image.Progress{Phase: image.PhaseDownload, Item: "node " + strconv.Itoa(i)}
			if i < ready {
				ev.Phase, ev.Current, ev.Total = image.PhaseUnpack, 1, 1
			}
			progress(ev)
		}
	}
	if err := n.p.Prepull(ctx, ref, report); err != nil {
		return nil, err
	}
	if progress != nil {
		progress(image.Progress{Phase: image.PhaseDone, Item: ref})
	}
	return nil, nil
}
