package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
)

// TestLLMArchiveByTenant: with two API keys, each reads only the
// exchanges of calls made with it (or with per-run keys it made) and
// those sandboxes made on their own channel (tenant ""); a request without
// a key (a daemon without keys) reads all.
func TestLLMArchiveByTenant(t *testing.T) {
	e, h := llmServer(t)
	const keyA, keyB = "a2e_tenant_a_key_0123456789", "a2e_tenant_b_key_0123456789"
	e.tenant = auth.Tenant(keyA)
	a := e.call(t, "", "", "a", false, "from a")
	e.tenant = auth.Tenant(keyB)
	b := e.call(t, "", "", "a", false, "from b")
	e.tenant = ""
	sb := e.call(t, "sb1", "", "a", false, "from a sandbox")
	e.tenant = auth.Tenant(keyA)
	a2 := e.call(t, "sb1", "run-1", "a", false, "from a, for sb1")

	as := func(key, target string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, target, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	list := func(key, query string) []string {
		t.Helper()
		rec := as(key, "/api/v1/llm/exchanges"+query)
		var l api.LLMExchangeList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || rec.Code != 200 {
			t.Fatalf("list: %d %s", rec.Code, rec.Body)
		}
		var ids []string
		for _, x := range l.Items {
			ids = append(ids, x.ID)
		}
		return ids
	}
	for _, tt := range []struct {
		key, query string
		want       []string
	}{
		{keyA, "", []string{a, sb, a2}},
		{keyB, "", []string{b, sb}},
		{"", "", []string{a, b, sb, a2}},
		{keyB, "?sandbox=sb1", []string{sb}},
		{keyA, "?run=run-1", []string{a2}},
		{keyB, "?run=run-1", nil},
	} {
		if diff := cmp.Diff(tt.want, list(tt.key, tt.query)); diff != "" {
			t.Errorf("key %q list%s (-want +got):\n%s", tt.key, tt.query, diff)
		}
	}

	// Another's exchange is not found, whole or in part.
	for _, target := range []string{"/api/v1/llm/exchanges/" + b, "/api/v1/llm/exchanges/" + b + "?raw=request"} {
		if rec := as(keyA, target); rec.Code != http.StatusNotFound {
			t.Errorf("key A: %s: %d %s, want 404", target, rec.Code, rec.Body)
		}
		if rec := as(keyB, target); rec.Code != http.StatusOK {
			t.Errorf("key B: %s: %d, want 200", target, rec.Code)
		}
	}
	if rec := as(keyB, "/api/v1/llm/exchanges/"+sb); rec.Code != http.StatusOK {
		t.Errorf("key B: a sandbox's exchange: %d, want 200", rec.Code)
	}

	// The export and the conversations are scoped the same way.
	rec := as(keyB, "/api/v1/llm/exchanges/export")
	var exported []string
	sc := bufio.NewScanner(bytes.NewReader(rec.Body.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d api.LLMExchangeDetail
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		exported = append(exported, d.ID)
	}
	if diff := cmp.Diff([]string{b, sb}, exported); diff != "" {
		t.Errorf("key B export (-want +got):\n%s", diff)
	}
	convs := func(key string) (ids []string) {
		var cl api.LLMConversationList
		_ = json.Unmarshal(as(key, "/api/v1/sandboxes/sb1/conversations").Body.Bytes(), &cl)
		for _, c := range cl.Items {
			for _, x := range c.Exchanges {
				ids = append(ids, x.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	want := []string{sb, a2}
	slices.Sort(want)
	if diff := cmp.Diff(want, convs(keyA)); diff != "" {
		t.Errorf("key A conversations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{sb}, convs(keyB)); diff != "" {
		t.Errorf("key B conversations (-want +got):\n%s", diff)
	}

	// The follow too: B's stream gets B's and the sandboxes' only.
	base, _ := streamServer(t, h)
	fb := follow(t, base, "?last=10", http.Header{"Authorization": {"Bearer " + keyB}})
	var got []string
	for range 2 {
		_, x := fb.next(t, 5*time.Second)
		got = append(got, x.ID)
	}
	e.tenant = auth.Tenant(keyA)
	e.call(t, "", "", "a", false, "a again")
	e.tenant = auth.Tenant(keyB)
	b2 := e.call(t, "", "", "a", false, "b again")
	_, x := fb.next(t, 5*time.Second)
	got = append(got, x.ID)
	if diff := cmp.Diff([]string{b, sb, b2}, got); diff != "" {
		t.Errorf("key B follow (-want +got):\n%s", diff)
	}
}
