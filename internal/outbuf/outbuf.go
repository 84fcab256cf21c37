// Package outbuf holds the output of executions that answer in one
// response rather than a stream: each Buffer keeps at most its own limit,
// and all of them together at most what one Budget allows, so that the
// daemon's memory stays bounded however many clients ask for however much
// output at once. Past either bound output is read and dropped, and
// counted.
//
// The budget is shared fairly among sandboxes, so that one sandbox's
// output cannot leave another's executions with none, however many it
// runs:
//
//   - the buffers of one sandbox hold at most half the budget;
//   - every buffer's first Floor bytes (64 KiB of each stream) are granted
//     within that half while the budget has room;
//   - past its floor a buffer grows only while its sandbox's buffers hold
//     less than three eighths of the budget and all buffers less than
//     seven eighths, so that the rest is kept for floors: those of the
//     sandbox's own later executions (an eighth of the budget, about 250
//     executions' two streams at the default 256 MiB), and those of other
//     sandboxes.
//
// So however much one sandbox prints, other sandboxes' executions keep
// their output within the other half, and each execution keeps the first
// 64 KiB of each stream unless its own sandbox has its half full of them;
// only several sandboxes printing at once fill the whole budget, and a
// hard bound on memory comes first.
//
// A Buffer grows by doubling up to its limit, taking each new capacity from
// the budget before allocating it, and String returns its bytes without a
// copy: a buffer of n bytes costs the daemon at most n plus the copy of the
// last growth, and the budget counts all of what it holds until Release.
package outbuf

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DefaultBudget is the daemon's default budget: 256 MiB.
const DefaultBudget = 256 << 20

// Floor is the output of each buffer that is granted before any buffer
// grows past its own: 64 KiB.
const Floor = 64 << 10

// floorCap is the capacity a buffer holds for its floor, with the room
// kept for a note.
const floorCap = Floor + NoteRoom

// Budget is a number of bytes that buffers take from as they grow and give
// back when released, shared fairly among their owners (sandboxes; see the
// package doc). It is safe for concurrent use.
type Budget struct {
	limit int64

	mu     sync.Mutex        // held to change what follows
	used   atomic.Int64      // read without mu
	peak   atomic.Int64      // read without mu
	owners map[string]*owner // by key
}

// owner is what the buffers of one owner, key, hold.
type owner struct {
	key     string
	held    int64
	buffers int // not yet released: the entry goes with the last
}

// NewBudget returns a budget of limit bytes (DefaultBudget if limit is not
// positive).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultBudget
	}
	return &Budget{limit: limit, owners: map[string]*owner{}}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// InUse returns the bytes buffers hold now.
func (b *Budget) InUse() int64 { return b.used.Load() }

// Peak returns the most bytes buffers have held at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// Describe says what bounds the budget sets, for the marker of output it
// cut short.
func (b *Budget) Describe() string {
	return fmt.Sprintf("the daemon's output memory (%d bytes for all executions at once, at most half of it for one sandbox)", b.limit)
}

// The fair share's bounds (see the package doc): floorShare is the most
// one owner's buffers hold, growthShare the most they hold before they stop
// growing past their floors, growthLimit the most all buffers hold then.
func (b *Budget) floorShare() int64  { return b.limit / 2 }
func (b *Budget) growthShare() int64 { return b.limit / 8 * 3 }
func (b *Budget) growthLimit() int64 { return b.limit - b.limit/8 }

// take reserves up to n more bytes for a buffer of o that holds held, and
// returns how many it got: what is left of the buffer's floor within the
// owner's half, then the rest within the growth limits (see the package
// doc).
func (b *Budget) take(o *owner, held, n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.used.Load()
	floor := min(n, max(floorCap-held, 0))
	got := max(min(floor, b.limit-used, b.floorShare()-o.held), 0)
	if got == floor && n > floor {
		got += max(min(n-floor, b.growthLimit()-used-got, b.growthShare()-o.held-got), 0)
	}
	b.used.Store(used + got)
	b.peak.Store(max(b.peak.Load(), used+got))
	o.held += got
	return got
}

// release gives back what a buffer of o held.
func (b *Budget) release(o *owner, held int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used.Add(-held)
	o.held -= held
	if o.buffers--; o.buffers == 0 {
		delete(b.owners, o.key)
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
	owner    *owner
	limit    int64
	buf      []byte
	held     int64 // taken from the budget: cap(buf), less a note's growth
	dropped  int64
	starved  bool // the budget, not the limit, cut it short
	released bool
}

// NewBuffer returns a buffer of at most limit bytes that takes its memory
// from b, as one of key's (the sandbox whose output it keeps).
func (b *Budget) NewBuffer(key string, limit int64) *Buffer {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.owners[key]
	if o == nil {
		o = &owner{key: key}
		b.owners[key] = o
	}
	o.buffers++
	return &Buffer{budget: b, owner: o, limit: max(limit, 0)}
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
	if got := int(b.budget.take(b.owner, b.held, int64(want-cap(b.buf)))); got > 0 {
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
	if b.released {
		return
	}
	b.budget.release(b.owner, b.held)
	b.held = 0
	b.released = true
}
