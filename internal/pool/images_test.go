package pool

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// imageTemplates resolves template names to specs of their image.
type imageTemplates map[string]string

func (t imageTemplates) Resolve(_ context.Context, name string, _ int) (api.TemplateSpec, int, error) {
	img, ok := t[name]
	if !ok {
		return api.TemplateSpec{}, 0, errdefs.NotFound("template %s", name)
	}
	return api.TemplateSpec{Image: img}, 1, nil
}

// The default images are the languages' sources by language, then the
// warm pools' by name, templates resolved and unknown ones left out.
func TestImages(t *testing.T) {
	templates := imageTemplates{"nodes": "agent2env/node", "py": "agent2env/py"}
	ci := contexts.DefaultImage
	tests := []struct {
		name     string
		sizes    map[string]int
		defaults map[string]contexts.Source
		want     []string
	}{
		{name: "defaults", want: []string{ci, ci, ci}},
		{name: "a language from a template", defaults: map[string]contexts.Source{api.LanguagePython: {Template: "py"}},
			want: []string{ci, ci, "agent2env/py"}},
		{name: "warm pools", sizes: map[string]int{"python": 2, "nodes": 1, "missing": 1},
			want: []string{ci, ci, ci, "agent2env/node", ci}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Images(context.Background(), tt.sizes, tt.defaults, templates, slog.New(slog.DiscardHandler))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}
