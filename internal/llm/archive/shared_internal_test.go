package archive

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// memBodies is store.LLMBodies in memory, whose unindexed records are
// all it has.
type memBodies map[string][]byte

func (m memBodies) PutLLMBody(_ context.Context, id string, _ time.Time, b []byte) error {
	m[id] = b
	return nil
}

func (m memBodies) LLMBody(_ context.Context, id string) ([]byte, error) {
	if b, ok := m[id]; ok {
		return b, nil
	}
	return nil, errdefs.NotFound("no records of %s", id)
}

func (m memBodies) UnindexedLLMBodies(context.Context, time.Duration, int) (map[string][]byte, error) {
	return m, nil
}

func (m memBodies) DeleteLLMArchived(context.Context, time.Time, int64) (int, error) {
	return 0, errors.New("not kept in memory")
}

// On a shared store the leader's sweep indexes an exchange whose records
// its daemon stored before stopping, unindexed (from the End record), and
// marks interrupted an old exchange in progress with no records.
func TestMendShared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bodies := memBodies{}
	a, err := Open(ctx, Config{Dir: filepath.Join(dir, "archive"), Bodies: bodies}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	created := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Microsecond)
	ended := &store.LLMExchange{ID: "llx_ended", Inbound: "openai", Method: http.MethodPost, Path: "/v1/chat/completions",
		Model: "m", State: store.LLMComplete, Status: 200, InputTokens: 5, OutputTokens: 2, CreatedAt: created}
	var b []byte
	b = appendRecord(b, &record{kind: kindBegin, id: ended.ID, at: created, meta: appendBeginMeta(nil, ended, nil),
		data: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
	b = appendRecord(b, &record{kind: kindEnd, id: ended.ID, at: created, meta: appendExMeta(nil, ended)})
	bodies[ended.ID] = b
	// Begun on a daemon that stopped: in progress, no records.
	open := &store.LLMExchange{ID: "llx_open", State: store.LLMInProgress, CreatedAt: created}
	if err := st.PutLLMExchanges(ctx, []*store.LLMExchange{open}, ""); err != nil {
		t.Fatal(err)
	}

	if err := a.mendShared(ctx, 0, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	x, err := st.GetLLMExchange(ctx, ended.ID)
	if err != nil || x.State != store.LLMComplete || x.InputTokens != 5 || x.MsgCount != 1 || x.Conversation != ended.ID {
		t.Errorf("the exchange whose end was not indexed: %+v, %v; want it complete, its message counted", x, err)
	}
	if x, err := st.GetLLMExchange(ctx, open.ID); err != nil || x.State != store.LLMInterrupted {
		t.Errorf("the exchange left in progress: %+v, %v; want interrupted", x, err)
	}
	got, err := a.Read(ctx, x)
	if err != nil || string(got.Request.Body) != `{"model":"m","messages":[{"role":"user","content":"hi"}]}` {
		t.Errorf("read from the records stored: %+v, %v", got, err)
	}
}
