// Package outbuf holds the output of executions that answer in one
// response rather than a stream: each Buffer keeps at most its own limit,
// and all of them together at most what one Budget allows, so that the
// daemon's memory stays bounded however many clients ask for however much
// output at once. Past either bound output is read and dropped, and
// counted.
//
// A Buffer grows by doubling up to its limit, taking each new capacity from
// the budget before allocating it, and String returns its bytes without a
// copy: a buffer of n bytes costs the daemon at most n plus the copy of the
// last growth, and the budget counts all of what it holds until Release.
package outbuf

import (
	"sync/atomic"
	"unsafe"
)

// DefaultBudget is the daemon's default budget: 256 MiB.
const DefaultBudget = 256 << 20

// Budget is a number of bytes that buffers take from as they grow and give
// back when released. It is safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
}

// NewBudget returns a budget of limit bytes (DefaultBudget if limit is not
// positive).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultBudget
	}
	return &Budget{limit: limit}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// InUse returns the bytes buffers hold now.
func (b *Budget) InUse() int64 { return b.used.Load() }

// Peak returns the most bytes buffers have held at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// take reserves up to n bytes and returns how many it got.
func (b *Budget) take(n int64) int64 {
	for {
		used := b.used.Load()
		got := min(n, b.limit-used)
		if got <= 0 {
			return 0
		}
		if b.used.CompareAndSwap(used, used+got) {
			b.raisePeak(used + got)
			return got
		}
	}
}

// raisePeak makes the peak at least n.
func (b *Budget) raisePeak(n int64) {
	for {
		p := b.peak.Load()
		if n <= p || b.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// NoteRoom is the most a Note may add. Every buffer keeps that much of its
// capacity free for one, so that a note never copies the output.
const NoteRoom = 256

// minGrowth is the first capacity of a buffer: small outputs grow once.
const minGrowth = 4 << 10

// Buffer keeps the bytes written to it, up to its limit and what the
// budget grants. Once it drops anything it drops all that follows, so what
// it keeps is always a prefix of the output. It is not safe for concurrent
// use.
type Buffer struct {
	budget   *Budget
	limit    int64
	buf      []byte
	held     int64 // taken from the budget: cap(buf), less a note's growth
	dropped  int64
	starved  bool // the budget, not the limit, cut it short
	released bool
}

// NewBuffer returns a buffer of at most limit bytes that takes its memory
// from b.
func (b *Budget) NewBuffer(limit int64) *Buffer {
	return &Buffer{budget: b, limit: max(limit, 0)}
}

// Write keeps what fits of p and always reports all of p written: output
// past the bounds is dropped, not an error to the command's pump.
func (b *Buffer) Write(p []byte) (int, error) {
	keep := 0
	if b.dropped == 0 && !b.released {
		keep = min(len(p), int(b.limit)-len(b.buf))
		if keep > b.room() {
			keep = b.grow(keep)
		}
		b.buf = append(b.buf, p[:keep]...)
	}
	b.dropped += int64(len(p) - keep)
	return len(p), nil
}

// room returns how much more output fits without growing: the capacity
// less what is kept for a note.
func (b *Buffer) room() int { return max(cap(b.buf)-NoteRoom-len(b.buf), 0) }

// grow makes room for n more bytes (n within the limit), as much as the
// budget grants, and returns how many of them now fit.
func (b *Buffer) grow(n int) int {
	want := max(2*cap(b.buf), len(b.buf)+n+NoteRoom, minGrowth)
	want = min(want, int(b.limit)+NoteRoom)
	if got := int(b.budget.take(int64(want - cap(b.buf)))); got > 0 {
		nb := make([]byte, len(b.buf), cap(b.buf)+got)
		copy(nb, b.buf)
		b.buf = nb
		b.held += int64(got)
	}
	fits := min(n, b.room())
	b.starved = fits < n
	return fits
}

// Note appends s, at most NoteRoom bytes, whatever the limit and the
// budget: a marker that says output was dropped. It fits in the room every
// buffer keeps, but for a buffer that the budget gave nothing at all: that
// one allocates the note outside the budget.
func (b *Buffer) Note(s string) {
	if len(s) > NoteRoom {
		s = s[:NoteRoom]
	}
	if cap(b.buf)-len(b.buf) < len(s) {
		nb := make([]byte, len(b.buf), len(b.buf)+len(s))
		copy(nb, b.buf)
		b.buf = nb
	}
	b.buf = append(b.buf, s...)
}

// Dropped returns the bytes written and not kept.
func (b *Buffer) Dropped() int64 { return b.dropped }

// Starved reports whether the budget, rather than the buffer's limit, made
// it drop output.
func (b *Buffer) Starved() bool { return b.starved }

// Len returns the bytes kept.
func (b *Buffer) Len() int { return len(b.buf) }

// String returns the bytes kept, without copying them: later writes only
// append, so the string never changes.
func (b *Buffer) String() string {
	return unsafe.String(unsafe.SliceData(b.buf), len(b.buf))
}

// Release gives the buffer's memory back to the budget; the strings String
// returned stay valid, and the buffer keeps nothing more. Release may be
// called more than once.
func (b *Buffer) Release() {
	b.budget.used.Add(-b.held)
	b.held = 0
	b.released = true
}
