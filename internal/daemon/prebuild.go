package daemon

import (
	"context"
	"time"

	"github.com/agent2env/agent2env/internal/daemon/supervisor"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/pool"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/service"
)

// Back-off of the background build after a failure: a mirror out of reach
// may come back, but a build that fails at once should not spin.
const (
	prebuildMinBackoff = time.Minute
	prebuildMaxBackoff = 30 * time.Minute
)

// localImages reports whether rt runs sandboxes from the daemon's image
// store, where built-in images are built; a cluster's nodes get images
// themselves.
func localImages(rt sandbox.Runtime) bool {
	_, ok := rt.(sandbox.ImagePreparer)
	return ok
}

// imagesOptions lists the built-in images in the image list where rt lets
// them be built.
func imagesOptions(rt sandbox.Runtime) []service.ImagesOption {
	if !localImages(rt) {
		return nil
	}
	return []service.ImagesOption{service.WithBuiltins(image.Builtins()...)}
}

// registerPrebuild registers the background build of the built-in images
// the defaults use (Config.PrebuildImages). A request that needs one
// meanwhile joins its build in the image store.
func (s *System) registerPrebuild() {
	if !s.cfg.PrebuildImages || !localImages(s.Runtime) {
		return
	}
	var images image.Ensurer = s.Images
	if s.cfg.prebuilder != nil {
		images = s.cfg.prebuilder
	}
	b := image.NewPrebuild(images, s.prebuildRefs, s.log)
	s.Loops.Go("image prebuild", b.Run, supervisor.Backoff(prebuildMinBackoff, prebuildMaxBackoff))
}

// prebuildRefs returns the images the defaults use (pool.Images), from
// the configuration as it is when called.
func (s *System) prebuildRefs(ctx context.Context) []string {
	return pool.Images(ctx, s.cfg.WarmPools, s.cfg.Contexts.Defaults, s.Templates, s.log)
}
