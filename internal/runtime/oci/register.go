package oci

import (
	"context"

	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Name is the runtime's registry name.
const Name = "oci"

// Settings of the oci runtime, as "oci.<key>" in runtime.Options.
const (
	settingBinary = "binary" // Config.RuntimeBinary
	settingCRIU   = "criu"   // Config.CRIU
)

func init() {
	runtime.Register(Name, func(ctx context.Context, opts runtime.Options) (sandbox.Runtime, error) {
		settings, err := opts.OwnSettings(Name, settingBinary, settingCRIU)
		if err != nil {
			return nil, err
		}
		return New(Config{
			Root:          opts.Root,
			RuntimeBinary: settings[settingBinary],
			CRIU:          settings[settingCRIU],
			Images:        opts.Images,
			Egress:        opts.Egress,
			Services:      opts.Services,
			Logger:        opts.Logger,
		})
	})
}
