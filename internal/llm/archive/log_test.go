package archive

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestScanStopsAtATornRecord: a segment's tail that a dying process left
// half written ends the segment; the records before it and the next
// segments are read.
func TestScanStopsAtATornRecord(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(dir, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := l.append(appendRecord(nil, &record{kind: kindBegin, id: id, at: time.Now(), data: []byte("body " + id)}), nil); err != nil {
			t.Fatal(err)
		}
	}
	l.close()
	torn := appendRecord(nil, &record{kind: kindEnd, id: "c", at: time.Now(), meta: []byte(`{}`)})
	f, _ := os.OpenFile(filepath.Join(dir, segName(1)), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(torn[:len(torn)-3])
	f.Close()
	if l, err = openLog(dir, 1<<20, 0); err != nil { // a new segment after the torn one
		t.Fatal(err)
	}
	if err := l.append(appendRecord(nil, &record{kind: kindBegin, id: "d", at: time.Now()}), nil); err != nil {
		t.Fatal(err)
	}
	l.close()
	var got []string
	if err := scan(dir, pos{}, func(at pos, r *record) error {
		got = append(got, r.id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "d"}, got); diff != "" {
		t.Errorf("scanned (-want +got):\n%s", diff)
	}
}

// TestSweepByAge: segments older than the limit go, and empty ones; the
// active one never.
func TestSweepByAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for seg, age := range map[int64]time.Duration{1: 50 * time.Hour, 2: 30 * time.Hour, 3: time.Hour, 4: 2 * time.Hour, 5: 100 * time.Hour} {
		p := filepath.Join(dir, segName(seg))
		data := []byte("x")
		if seg == 3 || seg == 5 {
			data = nil // 3 empty: removed though young; 5 empty and old, but active
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, now.Add(-age), now.Add(-age))
	}
	keep, err := sweep(dir, 5, 24*time.Hour, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := segments(dir)
	if keep != 4 || !cmp.Equal(left, []int64{4, 5}) {
		t.Errorf("kept from %d: %v, want from 4: [4 5]", keep, left)
	}
}
