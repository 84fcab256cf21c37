package wire

import (
	"io"

	"github.com/agent2env/agent2env/internal/llm"
)

// Queue holds the canonical events a stream decoder made from the last SSE
// event it read (one SSE event may make several), for its Next to hand out
// one by one.
type Queue struct {
	events []llm.Event
	i      int
	// Done is set when the stream's last event has been queued.
	Done bool
}

// Push queues ev.
func (q *Queue) Push(ev llm.Event) { q.events = append(q.events, ev) }

// Next returns the next queued event, calling read to queue more when none
// is left, and io.EOF once Done and drained.
func (q *Queue) Next(read func() error) (llm.Event, error) {
	for q.i >= len(q.events) {
		if q.Done {
			return llm.Event{}, io.EOF
		}
		q.events, q.i = q.events[:0], 0
		if err := read(); err != nil {
			return llm.Event{}, err
		}
	}
	q.i++
	return q.events[q.i-1], nil
}
