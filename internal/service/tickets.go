package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// The rules of terminal tickets: how long one lives and how many may be
// live at once.
const (
	TerminalTicketTTL  = 30 * time.Second
	maxTerminalTickets = 1000
)

// terminalTickets holds the live one-time tickets of terminal
// WebSockets, in memory: a ticket is for one sandbox, is redeemed once
// and expires after TerminalTicketTTL. Expired ones are dropped when a
// ticket is issued; at most maxTerminalTickets are live.
type terminalTickets struct {
	now func() time.Time
	mu  sync.Mutex
	// live maps the SHA-256 of a ticket's text to what it grants: the
	// lookup's timing tells nothing of the text, which is then compared
	// in constant time.
	live map[[sha256.Size]byte]ticketGrant
}

type ticketGrant struct {
	ticket, sandbox, tenant string
	expires                 time.Time
}

func newTerminalTickets() terminalTickets {
	return terminalTickets{now: time.Now, live: map[[sha256.Size]byte]ticketGrant{}}
}

// WithClock makes the service read the time of its tickets from now (for
// tests).
func WithClock(now func() time.Time) SandboxesOption {
	return func(s *Sandboxes) { s.tickets.now = now }
}

// TerminalTicket issues a one-time ticket for sandbox id's terminal
// WebSocket (GET .../exec/interactive?ticket=), for browsers, which
// cannot set an Authorization header on a WebSocket: it is valid once,
// for that sandbox only, for TerminalTicketTTL, and gives its request
// tenant (the tenant of the key that asked for it). A sandbox that does
// not exist is not found; with maxTerminalTickets live, the answer is
// errdefs.Unavailable.
func (s *Sandboxes) TerminalTicket(ctx context.Context, id, tenant string) (api.TerminalTicket, error) {
	if _, err := s.m.Get(ctx, id); err != nil {
		return api.TerminalTicket{}, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return api.TerminalTicket{}, err
	}
	t := &s.tickets
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for k, g := range t.live {
		if !now.Before(g.expires) {
			delete(t.live, k)
		}
	}
	if len(t.live) >= maxTerminalTickets {
		return api.TerminalTicket{}, errdefs.Unavailable("%d terminal tickets are live: try again in %s", len(t.live), TerminalTicketTTL)
	}
	out := api.TerminalTicket{Ticket: base64.RawURLEncoding.EncodeToString(b[:]), ExpiresAt: now.Add(TerminalTicketTTL).UTC()}
	t.live[sha256.Sum256([]byte(out.Ticket))] = ticketGrant{ticket: out.Ticket, sandbox: id, tenant: tenant, expires: out.ExpiresAt}
	return out, nil
}

// CheckTerminalTicket returns the tenant ticket grants on sandbox id's
// terminal without spending it, for a request to be validated before it
// spends it (RedeemTerminalTicket). A ticket unknown, used already,
// expired or issued for another sandbox is errdefs.ErrUnauthenticated.
func (s *Sandboxes) CheckTerminalTicket(ticket, id string) (string, error) {
	return s.tickets.use(ticket, id, false)
}

// RedeemTerminalTicket spends ticket on sandbox id's terminal and returns
// the tenant it grants; it fails as CheckTerminalTicket does. Of
// requests that checked the same ticket, one only redeems it.
func (s *Sandboxes) RedeemTerminalTicket(ticket, id string) (string, error) {
	return s.tickets.use(ticket, id, true)
}

// use returns the tenant ticket grants on sandbox id, spending it when
// spend is set. A ticket tried on another sandbox is left as it is (it
// grants nothing there); an expired one is dropped.
func (t *terminalTickets) use(ticket, id string, spend bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := sha256.Sum256([]byte(ticket))
	g, ok := t.live[h]
	if !ok || subtle.ConstantTimeCompare([]byte(g.ticket), []byte(ticket)) != 1 {
		return "", errBadTicket
	}
	if !t.now().Before(g.expires) {
		delete(t.live, h)
		return "", errBadTicket
	}
	if g.sandbox != id {
		return "", errBadTicket
	}
	if spend {
		delete(t.live, h)
	}
	return g.tenant, nil
}

var errBadTicket = fmt.Errorf("invalid, used or expired terminal ticket: %w", errdefs.ErrUnauthenticated)
