//go:build !no_kube

package all

import _ "github.com/agent2env/agent2env/internal/runtime/kube" // registers "kubernetes"
