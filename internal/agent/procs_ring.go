package agent

import (
	"sort"
	"sync"
	"unicode/utf8"
)

// maxRingSegments bounds the stream records of a ring. Output that
// alternates between stdout and stderr makes one per change; past the
// bound the oldest output goes with its record, so that the records take
// at most 16 bytes each of this many.
const maxRingSegments = 1 << 14

// ring keeps the latest output of a detached process: one buffer of its
// last size bytes, both streams interleaved as they were read, addressed
// by absolute offsets (the number of bytes the process wrote before
// them), with a list of segments telling which stream each byte came
// from. Writers do not wait: old output is overwritten, and a reader whose
// offset is no longer held learns it from the offset it is given instead;
// but while a holder is set (hold), a write waits rather than overwrite
// what the holder has not read (flow control). It is safe for concurrent
// use.
type ring struct {
	mu   sync.Mutex
	size int
	// buf grows to size; the byte at offset o is at buf[o%size].
	buf []byte
	// start and end delimit what is held: [start, end).
	start, end int64
	// segs are where each stream's runs begin, in order; segs[0].at <=
	// start.
	segs   []segment
	closed bool
	// changed is closed, and replaced, at every write and at close.
	changed chan struct{}
	// holder, when not nil, has read the output up to held; writes wait
	// on room (signalled as it reads, and at release) not to overwrite
	// the rest. noHold refuses holders from then on.
	holder any
	heldTo int64
	noHold bool
	room   *sync.Cond
}

// segment is a run of one stream's output from offset at on.
type segment struct {
	at     int64
	stream byte
}

func newRing(size int) *ring {
	r := &ring{size: size, changed: make(chan struct{})}
	r.room = sync.NewCond(&r.mu)
	return r
}

// hold makes h the ring's holder, having read up to offset at: writes
// wait for it from now on. A holder already there is replaced.
func (r *ring) hold(h any, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.noHold {
		return
	}
	r.holder, r.heldTo = h, max(at, r.start)
	r.room.Broadcast()
}

// advance records that holder h has read up to offset at.
func (r *ring) advance(h any, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == h && h != nil && at > r.heldTo {
		r.heldTo = at
		r.room.Broadcast()
	}
}

// pass makes to the holder in h's place, where h has read to, if h still
// holds.
func (r *ring) pass(h, to any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == h && h != nil {
		r.holder = to
	}
}

// release ends h's hold, if it still holds; release(nil) ends any hold,
// and refuses holders from then on (the process is being ended: its
// output waits for no one).
func (r *ring) release(h any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h == nil {
		r.noHold = true
	}
	if h == nil || r.holder == h {
		r.holder = nil
		r.room.Broadcast()
	}
}

// write appends p, of stream, and wakes the readers.
func (r *ring) write(stream byte, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A holder's unread output is not overwritten: wait until p fits
	// beside it (all of it read, when p is larger than the ring).
	for r.holder != nil && r.end-r.heldTo > int64(r.size-min(len(p), r.size)) {
		r.room.Wait()
	}
	if n := len(r.segs); n == 0 || r.segs[n-1].stream != stream {
		r.segs = append(r.segs, segment{at: r.end, stream: stream})
	}
	total := int64(len(p))
	at := r.end
	if len(p) > r.size {
		at += int64(len(p) - r.size)
		p = p[len(p)-r.size:]
	}
	if need := int(min(int64(r.size), r.end+total)); need > len(r.buf) {
		if need > cap(r.buf) {
			grown := make([]byte, len(r.buf), min(r.size, max(need, 2*cap(r.buf))))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = r.buf[:need]
	}
	for len(p) > 0 {
		k := copy(r.buf[at%int64(r.size):], p)
		at += int64(k)
		p = p[k:]
	}
	r.end += total
	r.start = max(r.start, r.end-int64(r.size))
	if len(r.segs) > maxRingSegments {
		r.segs = r.segs[1:]
		r.start = max(r.start, r.segs[0].at)
	}
	for len(r.segs) > 1 && r.segs[1].at <= r.start {
		r.segs = r.segs[1:]
	}
	r.notify()
}

// close marks the end of the output and wakes the readers.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.notify()
}

func (r *ring) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// held returns the offsets of the oldest byte held and after the newest.
func (r *ring) held() (start, end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start, r.end
}

// read copies into p output of one stream from offset from on and
// returns the offset it starts at, its stream and its length. When from
// is no longer held, it starts at the oldest held byte that begins a
// UTF-8 character (a terminal's output is not cut inside one), or a few
// bytes later when none does. When there is nothing to read it returns
// n = 0 and a channel the next write or the close closes, or nil once the
// ring is closed.
func (r *ring) read(from int64, p []byte) (at int64, stream byte, n int, wait <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at = min(max(from, 0), r.end)
	if at < r.start {
		at = r.start
		for i := 0; i < utf8.UTFMax-1 && at < r.end && !utf8.RuneStart(r.buf[at%int64(r.size)]); i++ {
			at++
		}
	}
	if at == r.end {
		if r.closed {
			return at, 0, 0, nil
		}
		return at, 0, 0, r.changed
	}
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].at > at }) - 1
	limit := r.end
	if i+1 < len(r.segs) {
		limit = r.segs[i+1].at
	}
	want := int(min(int64(len(p)), limit-at))
	for n < want {
		n += copy(p[n:want], r.buf[(at+int64(n))%int64(r.size):])
	}
	return at, r.segs[i].stream, n, nil
}
