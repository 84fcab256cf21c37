package prepull_test

import (
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/template"
)

// The daemon wires the two services to each other: these keep their
// interfaces in step.
var (
	_ template.Prepuller       = (*prepull.Service)(nil)
	_ prepull.TemplateResolver = (*template.Service)(nil)
)
