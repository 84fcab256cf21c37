package opensandbox

import (
	"strings"
	"testing"
)

func TestEgressPolicy(t *testing.T) {
	const status = `{"status":"ok","mode":"deny_all","enforcementMode":"dns"}`
	for _, tc := range []struct {
		name, method, target, body string
		template                   string // of sandbox a
		wantStatus                 int
		want                       string // the body, when set
		wantInMsg                  string
	}{
		{name: "deny-all", method: "GET", target: "/policy", wantStatus: 200,
			want: `{"status":"ok","mode":"deny_all","enforcementMode":"dns","policy":{"defaultAction":"deny","egress":[]}}`},
		{name: "deny rules change nothing", method: "PATCH", target: "/policy", body: `[{"action":"deny","target":"pypi.org"}]`,
			wantStatus: 200, want: status},
		{name: "allow rules are refused", method: "PATCH", target: "/policy", body: `[{"action":"deny","target":"a.b"},{"action":"allow","target":"pypi.org"}]`,
			wantStatus: 400, wantInMsg: "rules[1]: allowing pypi.org is not supported"},
		{name: "a rule without a target", method: "PATCH", target: "/policy", body: `[{"action":"deny"}]`, wantStatus: 400, wantInMsg: "rules[0].target"},
		{name: "an unknown action", method: "PATCH", target: "/policy", body: `[{"action":"log","target":"a.b"}]`, wantStatus: 400, wantInMsg: "rules[0].action"},
		{name: "deleting rules changes nothing", method: "DELETE", target: "/policy", body: `["pypi.org"]`, wantStatus: 200, want: status},
		{name: "a template's sandbox", method: "GET", target: "/policy", template: "py", wantStatus: 501, wantInMsg: "template py"},
		{name: "credential vaults", method: "GET", target: "/credential-vault", wantStatus: 501},
		{name: "unknown route", method: "GET", target: "/nothing", wantStatus: 404},
		{name: "method", method: "POST", target: "/policy", body: `[]`, wantStatus: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newExecdSetup(t)
			s.sbs.byID["a"].Template = tc.template
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
