package oci

import (
	"context"
	"os"
	"strconv"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Name is the runtime's registry name.
const Name = "oci"

// Settings of the oci runtime, as "oci.<key>" in runtime.Options.
const (
	settingBinary = "binary" // Config.RuntimeBinary
	settingCRIU   = "criu"   // Config.CRIU
	// SettingDiskProvisioning is DiskThin (default) or DiskThick:
	// Config.ThickDisks.
	SettingDiskProvisioning = "disk-provisioning"
	// SettingDiskReserve is Config.DiskReserve, in bytes.
	SettingDiskReserve = "disk-reserve"
)

// The values of SettingDiskProvisioning.
const (
	DiskThin  = "thin"
	DiskThick = "thick"
)

func init() {
	runtime.Register(Name, func(ctx context.Context, opts runtime.Options) (sandbox.Runtime, error) {
		settings, err := opts.OwnSettings(Name, settingBinary, settingCRIU, SettingDiskProvisioning, SettingDiskReserve)
		if err != nil {
			return nil, err
		}
		var thick bool
		switch p := settings[SettingDiskProvisioning]; p {
		case "", DiskThin:
		case DiskThick:
			thick = true
		default:
			return nil, errdefs.Invalid("oci runtime: disk provisioning %q is neither %s nor %s", p, DiskThin, DiskThick)
		}
		var reserve int64
		if v := settings[SettingDiskReserve]; v != "" {
			if reserve, err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, errdefs.Invalid("oci runtime: disk reserve %q: %v", v, err)
			}
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
			ThickDisks:    thick,
			DiskReserve:   reserve,
		})
	})
}
