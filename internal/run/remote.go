package run

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store"
)

// Run events between the daemons of a store: each daemon sends every
// event of the runs it carries out to the store's Notifier (topic
// eventsTopic), and a daemon asked to follow a run another daemon carries
// out passes on what comes for it (followElsewhere). A notification is
// sent once, to those listening: a follower sees the events from when it
// starts following (the earlier ones are in the other daemon's log), and
// the end, which it also reads from the run's record.

// eventsTopic is the Notifier topic of run events; cancelTopic that of
// the runs to cancel, by id, sent by the daemon asked to cancel a run
// another one carries out (followCancels).
const (
	eventsTopic = "run-events"
	cancelTopic = "run-cancel"
)

// pubBuffer is how many events wait to be sent; past it they are dropped
// (the run's own log keeps them all).
const pubBuffer = 4096

// remotePoll is how often a follower of a run elsewhere reads its record,
// which tells its end even when the end's notification was lost.
const remotePoll = 2 * time.Second

// note is the payload of a run event's notification.
type note struct {
	Run   string       `json:"run"`
	Event api.RunEvent `json:"event"`
}

// publish queues the notification of run id's event ev, dropping it when
// the queue is full. It never waits.
func (s *Service) publish(id string, ev api.RunEvent) {
	b, err := json.Marshal(note{Run: id, Event: ev})
	if err == nil && len(b) > store.MaxNotifyBytes {
		// What does not fit is in the run's log: the notification keeps
		// the event's kind and the start of its text.
		ev.Input = nil
		ev.Text = ev.Text[:min(len(ev.Text), store.MaxNotifyBytes/2)] + "…"
		b, err = json.Marshal(note{Run: id, Event: ev})
	}
	if err != nil || len(b) > store.MaxNotifyBytes {
		return
	}
	select {
	case s.pub <- b:
	default:
	}
}

// sendEvents sends the queued notifications until ctx ends.
func (s *Service) sendEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-s.pub:
			if err := s.notes.Notify(ctx, eventsTopic, b); err != nil && ctx.Err() == nil {
				s.log.Warn("send a run event to the other daemons", "err", err)
			}
		}
	}
}

// followElsewhere passes to fn the events of run id, which another daemon
// carries out, numbered after after, as they come, until its end event, ctx ends or fn fails.
// When the record says the run ended first (the end's notification was
// lost, or the run's daemon died and another ended it), its end event is
// made from the record.
func (s *Service) followElsewhere(ctx context.Context, id string, after int64, fn func(api.RunEvent) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	notes, err := s.notes.Listen(ctx, eventsTopic)
	if err != nil {
		return fmt.Errorf("follow run %s: %w", id, err)
	}
	t := time.NewTicker(remotePoll)
	defer t.Stop()
	seq := after
	pass := func(p []byte) (bool, error) {
		var n note
		if json.Unmarshal(p, &n) != nil || n.Run != id || n.Event.Seq <= seq {
			return false, nil
		}
		seq = n.Event.Seq
		return n.Event.Type == api.RunEventEnd, fn(n.Event)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p, ok := <-notes:
			if !ok {
				return ctx.Err()
			}
			if end, err := pass(p); end || err != nil {
				return err
			}
		case <-t.C:
			r, err := s.store.GetRun(ctx, id)
			if err != nil {
				return runErr(err, id)
			}
			if !final(r.Status) {
				continue
			}
			// What came before the record was read first.
			for len(notes) > 0 {
				if end, err := pass(<-notes); end || err != nil {
					return err
				}
			}
			return fn(endEvent(r, seq+1))
		}
	}
}

// cancelElsewhere asks the daemon carrying out active run r, when it is
// another one, to cancel it: it ends the run as its own cancel does.
func (s *Service) cancelElsewhere(ctx context.Context, r *store.Run) error {
	if s.notes == nil || final(r.Status) || r.ClaimedBy == "" || r.ClaimedBy == s.cfg.Owner {
		return nil
	}
	if err := s.notes.Notify(ctx, cancelTopic, []byte(r.ID)); err != nil {
		return fmt.Errorf("cancel run %s on the daemon carrying it out: %w", r.ID, err)
	}
	return nil
}

// followCancels cancels the runs this daemon carries out that another
// daemon was asked to cancel (cancelElsewhere), until ctx ends; a
// listener lost is made again.
func (s *Service) followCancels(ctx context.Context) {
	for ctx.Err() == nil {
		ids, err := s.notes.Listen(ctx, cancelTopic)
		if err != nil {
			s.log.Warn("listen for the runs other daemons cancel", "err", err)
		} else {
			for id := range ids {
				s.cancelJob(string(id))
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
