package store

import "time"

// MaxEvents is how many events a sandbox's history keeps: each write
// that adds events drops the oldest beyond it, in the same transaction,
// and counts them. A sandbox adds one or two events at each change of
// status (create, start, pause, resume, restart, a failure), most of them
// a line of text, so a thousand hold its creation and hundreds of
// changes after it in about 100 KB, while one paused and resumed for
// weeks no longer grows its history, nor the logs response that returns
// it whole, without end.
const MaxEvents = 1000

// ReadEvents reads the rows of a query of at, status, message and the
// number of dropped events, in that order, from either backend's driver:
// the events of sandbox sandboxID, and the number, which every row
// repeats. at scans into an At, which toTime makes a time.
func ReadEvents[At any](rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}, sandboxID string, toTime func(At) time.Time) ([]Event, int, error) {
	out := []Event{}
	var dropped int
	for rows.Next() {
		ev := Event{SandboxID: sandboxID}
		var at At
		if err := rows.Scan(&at, &ev.Status, &ev.Message, &dropped); err != nil {
			return nil, 0, err
		}
		ev.At = toTime(at)
		out = append(out, ev)
	}
	return out, dropped, rows.Err()
}
