package oci

import (
	"context"
	"os"

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
		// The agent alone when it is beside this binary (agentbin.go),
		// else this binary (New's default).
		var agent string
		if exe, err := os.Executable(); err == nil {
			agent = agentBeside(exe)
		}
		if agent == "" && opts.Logger != nil {
			opts.Logger.Info("oci runtime: no " + agentBesideName + " of this build beside the daemon; sandboxes run the daemon's own binary as their agent, ≈ 6 MiB more memory each")
		}
		return New(Config{
			Root:          opts.Root,
			AgentBinary:   agent,
			RuntimeBinary: settings[settingBinary],
			CRIU:          settings[settingCRIU],
			Images:        opts.Images,
			Egress:        opts.Egress,
			Services:      opts.Services,
			Logger:        opts.Logger,
		})
	})
}
