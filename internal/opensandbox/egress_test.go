package opensandbox

import (
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

func TestEgressPolicy(t *testing.T) {
	const status = `{"status":"ok","mode":"deny_all","enforcementMode":"proxy"}`
	allowList := &api.NetworkSpec{AllowedDomains: []string{"pypi.org", "*.allowed.test"}}
	for _, tc := range []struct {
		name, method, target, body string
		network                    *api.NetworkSpec // of sandbox a
		wantStatus                 int
		want                       string // the body, when set
		wantInMsg                  string
	}{
		{name: "deny-all", method: "GET", target: "/policy", wantStatus: 200,
			want: `{"status":"ok","mode":"deny_all","enforcementMode":"proxy","policy":{"defaultAction":"deny","egress":[]}}`},
		{name: "an allow-list", method: "GET", target: "/policy", network: allowList, wantStatus: 200,
			want: `{"status":"ok","mode":"allow_list","enforcementMode":"proxy","policy":{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"},{"action":"allow","target":"*.allowed.test"}]}}`},
		{name: "allow-all", method: "GET", target: "/policy", network: &api.NetworkSpec{AllowInternetAccess: true}, wantStatus: 200,
			want: `{"status":"ok","mode":"allow_all","enforcementMode":"proxy","policy":{"defaultAction":"allow","egress":[]}}`},
		{name: "deny rules change nothing", method: "PATCH", target: "/policy", body: `[{"action":"deny","target":"pypi.org"}]`,
			wantStatus: 200, want: status},
		{name: "allow rules that hold change nothing", method: "PATCH", target: "/policy", network: allowList,
			body: `[{"action":"allow","target":"a.allowed.test"},{"action":"deny","target":"example.com"}]`, wantStatus: 200},
		{name: "new allow rules are refused", method: "PATCH", target: "/policy", body: `[{"action":"deny","target":"a.b"},{"action":"allow","target":"pypi.org"}]`,
			wantStatus: 400, wantInMsg: "rules[1]: allowing pypi.org would change"},
		{name: "denying what is allowed is refused", method: "PATCH", target: "/policy", network: allowList,
			body: `[{"action":"deny","target":"x.allowed.test"}]`, wantStatus: 400, wantInMsg: "rules[0]: denying x.allowed.test would change"},
		{name: "a rule without a target", method: "PATCH", target: "/policy", body: `[{"action":"deny"}]`, wantStatus: 400, wantInMsg: "rules[0].target"},
		{name: "a CIDR target", method: "PATCH", target: "/policy", body: `[{"action":"deny","target":"10.0.0.0/8"}]`, wantStatus: 400, wantInMsg: "rules[0].target"},
		{name: "an unknown action", method: "PATCH", target: "/policy", body: `[{"action":"log","target":"a.b"}]`, wantStatus: 400, wantInMsg: "rules[0].action"},
		{name: "deleting rules changes nothing", method: "DELETE", target: "/policy", body: `["pypi.org"]`, wantStatus: 200, want: status},
		{name: "deleting an allow rule is refused", method: "DELETE", target: "/policy", network: allowList, body: `["x.org","PyPI.org"]`,
			wantStatus: 400, wantInMsg: "[1]: deleting the rule allowing PyPI.org"},
		{name: "credential vaults", method: "GET", target: "/credential-vault", wantStatus: 501},
		{name: "unknown route", method: "GET", target: "/nothing", wantStatus: 404},
		{name: "method", method: "POST", target: "/policy", body: `[]`, wantStatus: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newExecdSetup(t)
			s.sbs.byID["a"].Network = tc.network
			ctype := ""
			if tc.body != "" {
				ctype = "application/json"
			}
			rec := execdDo(t, s, tc.method, "/opensandbox/a/egress"+tc.target, ctype, strings.NewReader(tc.body), "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.want != "" && strings.TrimSpace(rec.Body.String()) != tc.want {
				t.Errorf("body %s, want %s", rec.Body, tc.want)
			}
			if !strings.Contains(rec.Body.String(), tc.wantInMsg) {
				t.Errorf("body %s does not say %q", rec.Body, tc.wantInMsg)
			}
		})
	}
}
