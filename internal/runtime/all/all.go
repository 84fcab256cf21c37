// Package all links in every sandbox runtime backend, each of which
// registers itself with package runtime. The daemon imports it for its
// side effects; build tags leave backends out (no_oci, no_kube).
package all
