//go:build !no_oci

package all

import _ "github.com/agent2env/agent2env/internal/runtime/oci" // registers "oci"
