package service

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// A ticket checks any number of times but redeems once: of requests that
// checked it, one only goes on; a try on another sandbox leaves it.
func TestTicketUse(t *testing.T) {
	tk := newTerminalTickets()
	tk.live[sha256.Sum256([]byte("T"))] = ticketGrant{ticket: "T", sandbox: "sb", tenant: "alice", expires: time.Now().Add(time.Minute)}
	steps := []struct {
		ticket, sandbox string
		spend           bool
		ok              bool
	}{
		{"T", "other", false, false},
		{"T", "other", true, false},
		{"T", "sb", false, true},
		{"T", "sb", false, true},
		{"U", "sb", true, false},
		{"T", "sb", true, true},
		{"T", "sb", true, false},
		{"T", "sb", false, false},
	}
	for i, st := range steps {
		tenant, err := tk.use(st.ticket, st.sandbox, st.spend)
		switch {
		case st.ok && (err != nil || tenant != "alice"):
			t.Errorf("step %d: %q, %v; want alice", i, tenant, err)
		case !st.ok && !errors.Is(err, errdefs.ErrUnauthenticated):
			t.Errorf("step %d: %q, %v; want ErrUnauthenticated", i, tenant, err)
		}
	}
}
