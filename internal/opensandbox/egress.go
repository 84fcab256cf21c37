package opensandbox

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/template"
)

// A sandbox reaches nothing beyond its own loopback but what its network
// allows through the daemon's egress proxy (api.NetworkSpec: every host,
// or named domains), fixed when the sandbox is made. OpenSandbox's
// networkPolicy maps onto it at create (networkSpec): defaultAction deny
// with allow rules naming domains is an allow-list, defaultAction allow
// without deny rules is every host. What the proxy cannot enforce (a deny
// inside what is allowed, IP and CIDR targets) is refused naming the
// field. The egress sidecar's /policy shows the sandbox's network as a
// policy, and accepts the changes that change nothing (docs/opensandbox.md
// §10).

// networkPolicy is OpenSandbox's NetworkPolicy.
type networkPolicy struct {
	DefaultAction string        `json:"defaultAction,omitempty"`
	Egress        []networkRule `json:"egress"`
}

// networkRule is OpenSandbox's NetworkRule.
type networkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// policyStatus is the egress sidecar's PolicyStatusResponse.
type policyStatus struct {
	Status          string         `json:"status"`
	Mode            string         `json:"mode"`
	EnforcementMode string         `json:"enforcementMode"`
	Reason          string         `json:"reason,omitempty"`
	Policy          *networkPolicy `json:"policy,omitempty"`
}

// fixedReason says why a sandbox's egress cannot change.
const fixedReason = "agent2env fixes a sandbox's network when it is made: give the rules in networkPolicy at create"

// checkRule checks rule i of field: its action and its target, a domain
// name or a "*." wildcard of one.
func checkRule(field string, i int, r networkRule) error {
	switch r.Action {
	case "allow", "deny":
	default:
		return errdefs.Invalid("%s[%d].action %q: want allow or deny", field, i, r.Action)
	}
	t := strings.TrimSpace(r.Target)
	switch {
	case t == "":
		return errdefs.Invalid("%s[%d].target is required", field, i)
	case strings.Contains(t, "/"):
		return errdefs.Invalid("%s[%d].target %q: CIDR targets are not supported; the egress proxy matches host names", field, i, r.Target)
	case strings.Contains(t, ":"):
		return errdefs.Invalid("%s[%d].target %q: give a domain name, without scheme or port (IPv6 targets are not supported)", field, i, r.Target)
	case !template.DomainPattern(t):
		return errdefs.Invalid("%s[%d].target %q: want a domain name (labels of letters, digits, '-' and '_' joined by dots) or a \"*.\" wildcard of one", field, i, r.Target)
	}
	return nil
}

// covers reports whether allowed, a domain or a "*." wildcard, lets
// target through: the same name, or a subdomain of the wildcard's.
func covers(allowed, target string) bool {
	allowed, target = normDomain(allowed), normDomain(target)
	if allowed == target {
		return true
	}
	suffix, ok := strings.CutPrefix(allowed, "*")
	return ok && strings.HasSuffix(target, suffix)
}

func normDomain(d string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
}

// networkSpec maps a create's networkPolicy onto the sandbox's network:
// nil for none (absent, null, {}, or deny-all whatever its deny rules).
func networkSpec(raw json.RawMessage) (*api.NetworkSpec, error) {
	if isNull(raw) {
		return nil, nil
	}
	var p networkPolicy
	if err := jsonbody.Unmarshal(raw, &p, "the value", true); err != nil {
		return nil, errdefs.Invalid("networkPolicy: %v", err)
	}
	var allowed, denied []int
	for i, r := range p.Egress {
		if err := checkRule("networkPolicy.egress", i, r); err != nil {
			return nil, err
		}
		if r.Action == "allow" {
			allowed = append(allowed, i)
		} else {
			denied = append(denied, i)
		}
	}
	switch p.DefaultAction {
	case "", "deny":
	case "allow":
		if len(denied) > 0 {
			i := denied[0]
			return nil, errdefs.Invalid("networkPolicy.egress[%d]: denying %s under defaultAction allow is not supported: the egress proxy allows every host or a list of domains",
				i, p.Egress[i].Target)
		}
		return &api.NetworkSpec{AllowInternetAccess: true}, nil
	default:
		return nil, errdefs.Invalid("networkPolicy.defaultAction %q: want allow or deny", p.DefaultAction)
	}
	// Deny rules name what is denied anyway, unless an allow rule lets it
	// through: the proxy has no exceptions to what it allows.
	for _, d := range denied {
		for _, a := range allowed {
			if covers(p.Egress[a].Target, p.Egress[d].Target) || covers(p.Egress[d].Target, p.Egress[a].Target) {
				return nil, errdefs.Invalid("networkPolicy.egress[%d]: denying %s where egress[%d] allows %s is not supported: the egress proxy has no exceptions to what it allows",
					d, p.Egress[d].Target, a, p.Egress[a].Target)
			}
		}
	}
	if len(allowed) == 0 {
		return nil, nil
	}
	n := &api.NetworkSpec{}
	for _, a := range allowed {
		n.AllowedDomains = append(n.AllowedDomains, strings.TrimSpace(p.Egress[a].Target))
	}
	return n, nil
}

// policyOf is the egress policy of a sandbox with network n.
func policyOf(n *api.NetworkSpec) policyStatus {
	s := policyStatus{Status: "ok", Mode: "deny_all", EnforcementMode: "proxy",
		Policy: &networkPolicy{DefaultAction: "deny", Egress: []networkRule{}}}
	switch {
	case n == nil:
	case n.AllowInternetAccess:
		s.Mode, s.Policy.DefaultAction = "allow_all", "allow"
	default:
		s.Mode = "allow_list"
		for _, d := range n.AllowedDomains {
			s.Policy.Egress = append(s.Policy.Egress, networkRule{Action: "allow", Target: d})
		}
	}
	return s
}

// allows reports whether network n lets target through.
func allows(n *api.NetworkSpec, target string) bool {
	if n == nil {
		return false
	}
	return n.AllowInternetAccess || slices.ContainsFunc(n.AllowedDomains, func(d string) bool { return covers(d, target) })
}

// listed reports whether target is one of n's allowed domains itself.
func listed(n *api.NetworkSpec, target string) bool {
	return n != nil && slices.ContainsFunc(n.AllowedDomains, func(d string) bool { return normDomain(d) == normDomain(target) })
}

// routeEgress serves the egress sidecar's /policy of sandbox id: GET
// answers its network as a policy; PATCH takes the rules that hold
// already (an allow of what is allowed, a deny of what is not) and
// refuses the others, which would change it; DELETE of rules by target
// takes the targets that are no rule of its own.
func (h *Handler) routeEgress(w http.ResponseWriter, r *http.Request, id, op string) {
	if op != "/policy" {
		if strings.HasPrefix(op, "/credential") {
			writeError(w, errdefs.NotImplemented("credential vaults are not supported by agent2env"))
			return
		}
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	sb, err := h.cfg.Sandboxes.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	status := policyOf(sb.Network)
	methods(w, r, map[string]http.HandlerFunc{
		http.MethodGet: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, status)
		},
		http.MethodPatch: func(w http.ResponseWriter, r *http.Request) {
			var rules []networkRule
			if err := decodeJSON(w, r, &rules); err != nil {
				writeError(w, err)
				return
			}
			for i, rule := range rules {
				if err := checkRule("rules", i, rule); err != nil {
					writeError(w, err)
					return
				}
				if (rule.Action == "allow") != allows(sb.Network, rule.Target) {
					writeError(w, errdefs.Invalid("rules[%d]: %sing %s would change the sandbox's egress: %s", i, rule.Action, rule.Target, fixedReason))
					return
				}
			}
			status.Policy = nil
			writeJSON(w, http.StatusOK, status)
		},
		http.MethodDelete: func(w http.ResponseWriter, r *http.Request) {
			var targets []string
			if err := decodeOptionalJSON(w, r, &targets); err != nil {
				writeError(w, err)
				return
			}
			for i, t := range targets {
				if listed(sb.Network, t) {
					writeError(w, errdefs.Invalid("[%d]: deleting the rule allowing %s would change the sandbox's egress: %s", i, t, fixedReason))
					return
				}
			}
			status.Policy = nil
			writeJSON(w, http.StatusOK, status)
		},
	})
}
