package store

import (
	"context"
	"sync"
)

// Notifier carries short messages between the daemons that share a
// store, by topic: what one daemon notifies, every listener of the topic,
// on any daemon, receives. Delivery is at most once and only to those
// listening when it is sent: a listener that wants what came before
// reads it from the records.
type Notifier interface {
	// Notify sends payload (at most MaxNotifyBytes) to topic's listeners.
	Notify(ctx context.Context, topic string, payload []byte) error
	// Listen returns the payloads sent to topic from now until ctx ends,
	// when the channel is closed. A listener that falls more than
	// NotifyBuffer payloads behind loses the ones that do not fit.
	Listen(ctx context.Context, topic string) (<-chan []byte, error)
}

// MaxNotifyBytes bounds a notification's payload (PostgreSQL's NOTIFY
// takes under 8000 bytes); NotifyBuffer is how many payloads a listener's
// channel holds.
const (
	MaxNotifyBytes = 7000
	NotifyBuffer   = 256
)

// Topics is a set of listeners by topic, which Notifier implementations
// deliver to. The zero value is ready to use; it is safe for concurrent
// use.
type Topics struct {
	mu   sync.Mutex
	subs map[string]map[chan []byte]struct{}
}

// Add makes a listener of topic until ctx ends, when its channel is
// closed and onLast is called if it was the topic's last listener.
func (t *Topics) Add(ctx context.Context, topic string, onLast func()) <-chan []byte {
	ch := make(chan []byte, NotifyBuffer)
	t.mu.Lock()
	if t.subs == nil {
		t.subs = map[string]map[chan []byte]struct{}{}
	}
	if t.subs[topic] == nil {
		t.subs[topic] = map[chan []byte]struct{}{}
	}
	t.subs[topic][ch] = struct{}{}
	t.mu.Unlock()
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		delete(t.subs[topic], ch)
		last := len(t.subs[topic]) == 0
		if last {
			delete(t.subs, topic)
		}
		close(ch)
		t.mu.Unlock()
		if last && onLast != nil {
			onLast()
		}
	})
	return ch
}

// Names returns the topics that have listeners.
func (t *Topics) Names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.subs))
	for name := range t.subs {
		out = append(out, name)
	}
	return out
}

// Deliver passes payload to topic's listeners, dropping it for those
// whose channel is full.
func (t *Topics) Deliver(topic string, payload []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.subs[topic] {
		select {
		case ch <- payload:
		default:
		}
	}
}

// LocalNotifier is the Notifier of a store one daemon owns (SQLite):
// notifications stay in the process.
type LocalNotifier struct{ topics Topics }

// Notify delivers payload to topic's listeners in this process.
func (n *LocalNotifier) Notify(_ context.Context, topic string, payload []byte) error {
	n.topics.Deliver(topic, payload)
	return nil
}

// Listen returns the payloads sent to topic until ctx ends.
func (n *LocalNotifier) Listen(ctx context.Context, topic string) (<-chan []byte, error) {
	return n.topics.Add(ctx, topic, nil), nil
}
