package outbuf

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// state is what the tests compare of a buffer.
type state struct {
	Kept    string
	Dropped int64
	Starved bool
}

func stateOf(b *Buffer) state { return state{b.String(), b.Dropped(), b.Starved()} }

func TestBuffer(t *testing.T) {
	big := strings.Repeat("x", 10_000)
	tests := []struct {
		name          string
		budget, limit int64
		writes        []string
		want          state
	}{
		{"under", 1 << 20, 10, []string{"abc", "de"}, state{Kept: "abcde"}},
		{"exactly the limit", 1 << 20, 5, []string{"abc", "de"}, state{Kept: "abcde"}},
		{"past the limit", 1 << 20, 4, []string{"abc", "de", "f"}, state{Kept: "abcd", Dropped: 2}},
		{"nothing after a drop", 1 << 20, 3, []string{"ab", "cd", "e"}, state{Kept: "abc", Dropped: 2}},
		{"empty writes", 1 << 20, 3, []string{"", "a", ""}, state{Kept: "a"}},
		{"zero limit", 1 << 20, 0, []string{"a"}, state{Dropped: 1}},
		{"grows past the first capacity", 1 << 20, 1 << 20, []string{big, big, big}, state{Kept: big + big + big}},
		// The sandbox's half of the budget covers the first capacity (4
		// KiB) and a little more: what fits, less the room kept for a note.
		{"budget", 2 * (minGrowth + 100), 1 << 20, []string{big}, state{Kept: big[:minGrowth+100-NoteRoom], Dropped: int64(len(big) - (minGrowth + 100 - NoteRoom)), Starved: true}},
		{"no budget", 1, 1 << 20, []string{"a"}, state{Dropped: 1, Starved: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := NewBudget(tt.budget)
			b := budget.NewBuffer("sb", tt.limit)
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(w), n, err)
				}
			}
			if diff := cmp.Diff(tt.want, stateOf(b)); diff != "" {
				t.Errorf("buffer (-want +got):\n%s", diff)
			}
			if in := budget.InUse(); in > budget.Limit() || in < int64(b.Len()) {
				t.Errorf("budget in use %d, limit %d, kept %d", in, budget.Limit(), b.Len())
			}
			b.Release()
			b.Release()
			if in := budget.InUse(); in != 0 {
				t.Errorf("budget in use after release: %d", in)
			}
			kept := b.String()
			b.Write([]byte("more"))
			if b.String() != kept {
				t.Errorf("a released buffer kept more: %q", b.String())
			}
		})
	}
}

// A note fits in the room the buffer kept, without growing it.
func TestNote(t *testing.T) {
	budget := NewBudget(minGrowth)
	b := budget.NewBuffer("sb", 1<<20)
	b.Write(bytes.Repeat([]byte("x"), 2*minGrowth))
	if !b.Starved() {
		t.Fatal("not starved")
	}
	before := cap(b.buf)
	note := strings.Repeat("n", NoteRoom)
	b.Note(note)
	if cap(b.buf) != before || !strings.HasSuffix(b.String(), note) {
		t.Errorf("note grew the buffer from %d to %d, or is not at the end", before, cap(b.buf))
	}
	if budget.InUse() > budget.Limit() {
		t.Errorf("budget in use %d > %d", budget.InUse(), budget.Limit())
	}

	// A buffer the budget gave nothing still takes its note.
	empty := budget.NewBuffer("sb", 1<<20)
	empty.Write([]byte("x"))
	empty.Note("[cut]")
	if empty.String() != "[cut]" {
		t.Errorf("starved buffer kept %q", empty.String())
	}
}

// The strings a buffer returned never change, whatever it is given after.
func TestStringStable(t *testing.T) {
	b := NewBudget(1<<20).NewBuffer("sb", 1<<20)
	b.Write([]byte("abc"))
	s := b.String()
	b.Write(bytes.Repeat([]byte("y"), 3*minGrowth))
	b.Note("!")
	if s != "abc" {
		t.Errorf("earlier string became %q", s)
	}
}

// However many buffers write at once, what they hold stays within the
// budget, and all of it comes back.
func TestBudgetConcurrent(t *testing.T) {
	const limit = 1 << 20
	budget := NewBudget(limit)
	chunk := bytes.Repeat([]byte("z"), 32<<10)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := budget.NewBuffer(fmt.Sprint("sb", i%4), 256<<10)
			for range 16 {
				b.Write(chunk)
			}
			b.Release()
		}()
	}
	wg.Wait()
	if peak := budget.Peak(); peak > limit || peak < limit/2 {
		t.Errorf("budget peaked at %d, want up to %d", peak, limit)
	}
	if in := budget.InUse(); in != 0 || len(budget.owners) != 0 {
		t.Errorf("in use after all released: %d, by %d sandboxes", in, len(budget.owners))
	}
}

// What buffers keep of their output, by the rules of the package doc,
// when each writes all its output and holds it while the next writes.
func TestFairShare(t *testing.T) {
	// Growth stops at 896 KiB, one sandbox's at 384 KiB; a sandbox holds
	// at most 512 KiB.
	const L = 1 << 20
	type write struct {
		owner string
		n     int
	}
	// Outcomes: the whole output kept; cut short past the floor; exactly
	// the floor kept; less than the floor.
	const whole, cut, floor, less = "whole", "cut", "floor", "less"
	tests := []struct {
		name   string
		budget int64
		writes []write
		want   []string
	}{
		// 384 KiB grown, then floors of 64 KiB and the note's room: the
		// fourth fits but for 512 bytes, the fifth not at all.
		{"one sandbox grows to three eighths, then keeps floors", L,
			[]write{{"a", 300e3}, {"a", 300e3}, {"a", 300e3}, {"a", 300e3}}, []string{whole, cut, floor, less}},
		{"one sandbox holds at most half", L,
			[]write{{"a", 300e3}, {"a", 300e3}, {"a", 300e3}, {"a", 300e3}, {"a", 300e3}}, []string{whole, cut, floor, less, less}},
		{"another sandbox keeps its output", L,
			[]write{{"a", 300e3}, {"a", 300e3}, {"a", 300e3}, {"a", 300e3}, {"a", 300e3}, {"b", 300e3}},
			[]string{whole, cut, floor, less, less, whole}},
		{"outputs within the floor are kept whole", L,
			[]write{{"a", 300e3}, {"a", 300e3}, {"a", Floor}, {"a", 1000}}, []string{whole, cut, whole, whole}},
		{"the last eighth is for floors", L,
			[]write{{"a", 300e3}, {"a", 300e3}, {"b", 300e3}, {"b", 300e3}, {"c", 300e3}, {"d", 300e3}, {"e", 300e3}},
			[]string{whole, cut, whole, cut, cut, floor, less}},
		{"floors stay within the budget", 3 * Floor,
			[]write{{"a", Floor}, {"b", Floor}, {"c", Floor}, {"d", Floor}}, []string{whole, whole, less, less}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := NewBudget(tt.budget)
			var got []string
			var bufs []*Buffer
			for _, w := range tt.writes {
				b := budget.NewBuffer(w.owner, 1<<20)
				bufs = append(bufs, b)
				b.Write(bytes.Repeat([]byte("x"), w.n))
				switch {
				case b.Len() == w.n && !b.Starved():
					got = append(got, whole)
				case !b.Starved():
					t.Fatalf("%d of %d bytes kept, not starved", b.Len(), w.n)
				case b.Len() > Floor:
					got = append(got, cut)
				case b.Len() == Floor:
					got = append(got, floor)
				default:
					got = append(got, less)
				}
				if in := budget.InUse(); in > budget.Limit() {
					t.Fatalf("budget in use %d > %d", in, budget.Limit())
				}
				if held, share := budget.owners[w.owner].held, budget.Limit()/2; held > share {
					t.Fatalf("sandbox %s holds %d, above its share %d", w.owner, held, share)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			for _, b := range bufs {
				b.Release()
			}
			if in := budget.InUse(); in != 0 || len(budget.owners) != 0 {
				t.Errorf("in use after all released: %d, by %d sandboxes", in, len(budget.owners))
			}
		})
	}
}
