package opensandbox

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// A sandbox made through /v1 is made from an image, and an agent2env
// sandbox from an image reaches nothing beyond its own loopback: its
// egress policy is OpenSandbox's deny-all, with no rule. Egress is opened
// only by an agent2env template's network (allowInternetAccess,
// allowedDomains), fixed when the sandbox is made. So the policies this
// surface accepts are those that deny everything, at create and on the
// egress sidecar's routes (docs/opensandbox.md §10); allowing anything is
// refused with the reason.

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

// denyAll is the policy of every sandbox made through /v1.
var denyAll = networkPolicy{DefaultAction: "deny", Egress: []networkRule{}}

// policyStatus is the egress sidecar's PolicyStatusResponse.
type policyStatus struct {
	Status          string         `json:"status"`
	Mode            string         `json:"mode"`
	EnforcementMode string         `json:"enforcementMode"`
	Reason          string         `json:"reason,omitempty"`
	Policy          *networkPolicy `json:"policy,omitempty"`
}

// noEgressReason says why a sandbox's egress cannot be opened here.
const noEgressReason = "a sandbox made through the OpenSandbox API reaches nothing beyond its loopback, " +
	"and agent2env fixes a sandbox's network when it is made; egress to named domains is given by " +
	"an agent2env template's network.allowedDomains"

// checkRules refuses rules that allow anything; field names them.
func checkRules(field string, rules []networkRule) error {
	for i, r := range rules {
		switch strings.ToLower(r.Action) {
		case "deny":
		case "allow":
			return errdefs.Invalid("%s[%d]: allowing %s is not supported: %s", field, i, r.Target, noEgressReason)
		default:
			return errdefs.Invalid("%s[%d].action %q: want allow or deny", field, i, r.Action)
		}
		if strings.TrimSpace(r.Target) == "" {
			return errdefs.Invalid("%s[%d].target is required", field, i)
		}
	}
	return nil
}

// checkNetworkPolicy accepts a create's networkPolicy when it denies
// everything (absent, null, {}, or defaultAction deny with deny rules
// only), which is what the sandbox gets.
func checkNetworkPolicy(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var p networkPolicy
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return errdefs.Invalid("networkPolicy: %v", err)
	}
	switch strings.ToLower(p.DefaultAction) {
	case "", "deny":
	case "allow":
		return errdefs.Invalid("networkPolicy.defaultAction allow is not supported: %s", noEgressReason)
	default:
		return errdefs.Invalid("networkPolicy.defaultAction %q: want allow or deny", p.DefaultAction)
	}
	return checkRules("networkPolicy.egress", p.Egress)
}

// routeEgress serves the egress sidecar's /policy of sandbox id: GET
// answers deny-all; PATCH takes deny rules, which change nothing, and
// refuses allow rules; DELETE of rules by target changes nothing, as
// there are none. A sandbox made from a template has the template's
// network, which this surface does not show: 501.
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
	if sb.Template != "" {
		writeError(w, errdefs.NotImplemented("sandbox %s was made from template %s, whose network is its egress policy; read it with GET /api/v1/templates/%s",
			id, sb.Template, sb.Template))
		return
	}
	status := policyStatus{Status: "ok", Mode: "deny_all", EnforcementMode: "dns"}
	methods(w, r, map[string]http.HandlerFunc{
		http.MethodGet: func(w http.ResponseWriter, r *http.Request) {
			p := denyAll
			status.Policy = &p
			writeJSON(w, http.StatusOK, status)
		},
		http.MethodPatch: func(w http.ResponseWriter, r *http.Request) {
			var rules []networkRule
			if err := decodeJSON(w, r, &rules); err != nil {
				writeError(w, err)
				return
			}
			if err := checkRules("rules", rules); err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, status)
		},
		http.MethodDelete: func(w http.ResponseWriter, r *http.Request) {
			var targets []string
			if err := decodeOptionalJSON(w, r, &targets); err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, status)
		},
	})
}
