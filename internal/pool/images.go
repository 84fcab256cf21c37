package pool

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/manager"
)

// Images returns the images sandboxes are made from by default: every
// language's default source of the contexts service (defaults, completed
// by contexts.Sources), by language, then each warm pool's of sizes (see
// Specs). Templates are resolved to their latest version's image; one
// that does not resolve is logged and left out. The daemon builds these
// in the background from the start.
func Images(ctx context.Context, sizes map[string]int, defaults map[string]contexts.Source,
	templates manager.TemplateResolver, log *slog.Logger) []string {
	sources := contexts.Sources(defaults)
	var refs []string
	add := func(src contexts.Source) {
		if src.Template == "" {
			refs = append(refs, src.Image)
			return
		}
		spec, _, err := templates.Resolve(ctx, src.Template, 0)
		if err != nil {
			log.Warn("default images: resolve template", "template", src.Template, "err", err)
			return
		}
		refs = append(refs, spec.Image)
	}
	for _, lang := range slices.Sorted(maps.Keys(sources)) {
		add(sources[lang])
	}
	for _, spec := range Specs(sizes, sources) {
		add(contexts.Source{Template: spec.Request.Template, Image: spec.Request.Image})
	}
	return refs
}
