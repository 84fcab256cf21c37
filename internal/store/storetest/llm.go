package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var llmTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"LLMExchangePutGet", testLLMPutGet},
	{"LLMExchangeList", testLLMList},
	{"LLMExchangeConversations", testLLMConversations},
	{"LLMExchangeDelete", testLLMDelete},
	{"LLMExchangeEnded", testLLMEnded},
	{"LLMExchangeTenant", testLLMTenant},
	{"LLMTokens", testLLMTokens},
}

func llmSample(id string, at time.Time) *store.LLMExchange {
	return &store.LLMExchange{
		ID: id, SandboxID: "sb1", RunID: "run1", KeyID: "k1", Inbound: "anthropic", Method: "POST", Path: "/v1/messages?beta=true",
		Model: "coder", Provider: "local", UpstreamModel: "qwen", Stream: true, Status: 200, State: store.LLMComplete,
		InputTokens: 10, OutputTokens: 5, CachedTokens: 2, ReasoningTokens: 1, Attempts: 1,
		FirstByte: 3 * time.Millisecond, Duration: 40 * time.Millisecond, CreatedAt: at.UTC().Truncate(time.Microsecond),
		RequestBytes: 100, ResponseBytes: 200, StoredBytes: 90, Segment: 1, Locations: []byte{1, 2, 3},
	}
}

func testLLMPutGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	if mark, err := s.LLMArchiveMark(ctx); err != nil || mark != "" {
		t.Fatalf("first mark = %q, %v", mark, err)
	}
	x := llmSample("x1", time.Now())
	x.State = store.LLMInProgress
	if err := s.PutLLMExchanges(ctx, []*store.LLMExchange{x}, "m1"); err != nil {
		t.Fatal(err)
	}
	done := *x
	done.State, done.Error = store.LLMClientGone, "client left"
	if err := s.PutLLMExchanges(ctx, []*store.LLMExchange{&done}, "m2"); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetLLMExchange(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&done, got, cmpopts.IgnoreFields(store.LLMExchange{}, "PrefixHashes")); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	if mark, err := s.LLMArchiveMark(ctx); err != nil || mark != "m2" {
		t.Errorf("mark = %q, %v; want m2", mark, err)
	}
	if _, err := s.GetLLMExchange(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get unknown: %v, want not found", err)
	}
}

func testLLMList(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	var all []*store.LLMExchange
	for i, c := range []struct {
		sandbox, run, model string
		status              int
	}{
		{"sb1", "r1", "a", 200}, {"sb1", "r1", "b", 429}, {"sb2", "r2", "a", 200}, {"sb2", "", "a", 500}, {"sb1", "r1", "a", 200},
	} {
		x := llmSample(string(rune('a'+i)), base.Add(time.Duration(i)*time.Minute))
		x.SandboxID, x.RunID, x.Model, x.Status = c.sandbox, c.run, c.model, c.status
		all = append(all, x)
	}
	if err := s.PutLLMExchanges(ctx, all, "m"); err != nil {
		t.Fatal(err)
	}
	ids := func(xs []*store.LLMExchange) (out []string) {
		for _, x := range xs {
			out = append(out, x.ID)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		f    store.LLMExchangeFilter
		want []string
	}{
		{"all", store.LLMExchangeFilter{}, []string{"a", "b", "c", "d", "e"}},
		{"sandbox", store.LLMExchangeFilter{SandboxID: "sb2"}, []string{"c", "d"}},
		{"run", store.LLMExchangeFilter{RunID: "r1"}, []string{"a", "b", "e"}},
		{"model", store.LLMExchangeFilter{Model: "b"}, []string{"b"}},
		{"status", store.LLMExchangeFilter{StatusMin: 400, StatusMax: 599}, []string{"b", "d"}},
		{"since-until", store.LLMExchangeFilter{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute)}, []string{"b", "c"}},
		{"state", store.LLMExchangeFilter{State: store.LLMInterrupted}, nil},
	} {
		got, next, err := s.ListLLMExchangePage(ctx, tt.f, store.Page{})
		if err != nil || next != "" {
			t.Fatalf("%s: next %q, %v", tt.name, next, err)
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	for _, tt := range []struct {
		f    store.LLMExchangeFilter
		desc bool
		want []string
	}{
		{store.LLMExchangeFilter{}, false, []string{"a", "b", "c", "d", "e"}},
		{store.LLMExchangeFilter{}, true, []string{"e", "d", "c", "b", "a"}},
		{store.LLMExchangeFilter{RunID: "r1"}, true, []string{"e", "b", "a"}},
	} {
		paged := slices.Concat(pages(t, store.Page{Limit: 2, Desc: tt.desc}, func(p store.Page) ([]*store.LLMExchange, string, error) {
			return s.ListLLMExchangePage(ctx, tt.f, p)
		}, func(x *store.LLMExchange) string { return x.ID })...)
		if diff := cmp.Diff(tt.want, paged); diff != "" {
			t.Errorf("%+v, pages of 2, newest first %v (-want +got):\n%s", tt.f, tt.desc, diff)
		}
	}
}

// testLLMConversations: a request whose messages extend an earlier one's
// (in the same sandbox and run) joins its conversation.
func testLLMConversations(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	mk := func(id, sandbox string, hash string, prefixes ...string) *store.LLMExchange {
		x := llmSample(id, now)
		now = now.Add(time.Second)
		x.SandboxID, x.MsgHash, x.MsgCount, x.PrefixHashes = sandbox, hash, len(prefixes)+1, prefixes
		return x
	}
	// a: [1]; b: [1 2 3] continues a; c: [9] starts anew; d: [1 2 3 4 5]
	// continues b; e: [1 2 3] in another sandbox starts anew.
	batch := []*store.LLMExchange{
		mk("a", "sb1", "h1"),
		mk("b", "sb1", "h123", "h12", "h1"),
		mk("c", "sb1", "h9"),
	}
	if err := s.PutLLMExchanges(ctx, batch, "m"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLLMExchanges(ctx, []*store.LLMExchange{
		mk("d", "sb1", "h12345", "h1234", "h123", "h12", "h1"),
		mk("e", "sb2", "h123", "h12", "h1"),
	}, "m"); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	all, _, err := s.ListLLMExchangePage(ctx, store.LLMExchangeFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		got[x.ID] = x.Conversation
	}
	want := map[string]string{"a": "a", "b": "a", "c": "c", "d": "a", "e": "e"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conversations (-want +got):\n%s", diff)
	}
}

func testLLMDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	var xs []*store.LLMExchange
	for i := range 4 {
		x := llmSample(string(rune('a'+i)), time.Now())
		x.Segment = int64(i + 1)
		xs = append(xs, x)
	}
	if err := s.PutLLMExchanges(ctx, xs, "m"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteLLMExchanges(ctx, 3); err != nil || n != 2 {
		t.Fatalf("delete = %d, %v; want 2", n, err)
	}
	left, _, err := s.ListLLMExchangePage(ctx, store.LLMExchangeFilter{}, store.Page{})
	if err != nil || len(left) != 2 || left[0].Segment != 3 {
		t.Errorf("left %d exchanges (%v)", len(left), err)
	}
}

// testLLMEnded: exchanges are numbered in the order they are stored ended,
// once; a follower lists those after a mark.
func testLLMEnded(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	put := func(id, state string) {
		t.Helper()
		x := llmSample(id, now)
		x.State = state
		if id == "late" {
			x.CreatedAt = now.Add(-time.Hour) // begun first, ended last
		}
		if err := s.PutLLMExchanges(ctx, []*store.LLMExchange{x}, "m"); err != nil {
			t.Fatal(err)
		}
	}
	put("late", store.LLMInProgress)
	put("a", store.LLMComplete)
	put("b", store.LLMInProgress)
	if m, err := s.LLMEndedMark(ctx, store.LLMExchangeFilter{}, 0); err != nil || m == 0 {
		t.Fatalf("mark = %d, %v; want the mark of a", m, err)
	}
	put("late", store.LLMClientGone)
	put("b", store.LLMComplete)
	put("a", store.LLMComplete) // again: keeps its place
	ids := func(after int64, f store.LLMExchangeFilter) (out []string) {
		t.Helper()
		xs, err := s.ListEndedLLMExchanges(ctx, f, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			out = append(out, x.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"a", "late", "b"}, ids(0, store.LLMExchangeFilter{})); diff != "" {
		t.Errorf("ended (-want +got):\n%s", diff)
	}
	mark, err := s.LLMEndedMark(ctx, store.LLMExchangeFilter{}, 2) // before the last two
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"late", "b"}, ids(mark, store.LLMExchangeFilter{})); diff != "" {
		t.Errorf("after the mark two back (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"late"}, ids(0, store.LLMExchangeFilter{State: store.LLMClientGone})); diff != "" {
		t.Errorf("filtered (-want +got):\n%s", diff)
	}
	if m, err := s.LLMEndedMark(ctx, store.LLMExchangeFilter{}, 5); err != nil || m != 0 {
		t.Errorf("mark past the first = %d, %v; want 0", m, err)
	}
}

// testLLMTenant: a tenant sees its exchanges and those of no tenant.
func testLLMTenant(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	var xs []*store.LLMExchange
	for i, tenant := range []string{"t1", "t2", "", "t1"} {
		x := llmSample(string(rune('a'+i)), now.Add(time.Duration(i)*time.Second))
		x.Tenant = tenant
		xs = append(xs, x)
	}
	if err := s.PutLLMExchanges(ctx, xs, "m"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		f    store.LLMExchangeFilter
		want []string
	}{
		{store.LLMExchangeFilter{}, []string{"a", "b", "c", "d"}},
		{store.LLMExchangeFilter{ByTenant: true, Tenant: "t1"}, []string{"a", "c", "d"}},
		{store.LLMExchangeFilter{ByTenant: true, Tenant: "t2"}, []string{"b", "c"}},
	} {
		got, _, err := s.ListLLMExchangePage(ctx, tt.f, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range got {
			ids = append(ids, x.ID)
		}
		if diff := cmp.Diff(tt.want, ids); diff != "" {
			t.Errorf("tenant %q (-want +got):\n%s", tt.f.Tenant, diff)
		}
		ended, err := s.ListEndedLLMExchanges(ctx, tt.f, 0, 10)
		if err != nil || len(ended) != len(tt.want) {
			t.Errorf("tenant %q: %d ended, %v; want %d", tt.f.Tenant, len(ended), err, len(tt.want))
		}
	}
	if got, err := s.GetLLMExchange(ctx, "b"); err != nil || got.Tenant != "t2" {
		t.Errorf("get b: %+v, %v; want tenant t2", got, err)
	}
}

// testLLMTokens: the tokens of the exchanges a filter selects, summed (0
// for none).
func testLLMTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	for i, sb := range []string{"sb1", "sb1", "sb2"} {
		x := llmSample(fmt.Sprint("x", i), now)
		x.SandboxID = sb
		if err := s.PutLLMExchanges(ctx, []*store.LLMExchange{x}, "m"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		f    store.LLMExchangeFilter
		want int64
	}{
		{store.LLMExchangeFilter{SandboxID: "sb1"}, 30},
		{store.LLMExchangeFilter{RunID: "run1"}, 45},
		{store.LLMExchangeFilter{SandboxID: "none"}, 0},
	} {
		if n, err := s.LLMTokens(ctx, tc.f); err != nil || n != tc.want {
			t.Errorf("LLMTokens(%+v) = %d, %v; want %d", tc.f, n, err, tc.want)
		}
	}
}
