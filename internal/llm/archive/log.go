package archive

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kinds of records in the log.
const (
	kindBegin            byte = 1 // meta: beginMeta; data: the request body
	kindUpstreamRequest  byte = 2 // meta: httpMeta; data: its body
	kindUpstreamResponse byte = 3 // meta: httpMeta (status, header)
	kindUpstreamData     byte = 4 // data: a batch of chunks
	kindResponse         byte = 5 // meta: httpMeta (status, header)
	kindResponseData     byte = 6 // data: a batch of chunks
	kindEnd              byte = 7 // meta: the exchange's index record
)

// Data is stored raw up to this size: compressing less gains little and
// costs the request the most per byte (zstd's tables are built per call).
const compressAbove = 1 << 10

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// pos is where a record starts: a segment and an offset in it.
type pos struct {
	seg int64
	off int64
}

func (p pos) less(q pos) bool { return p.seg < q.seg || p.seg == q.seg && p.off < q.off }

func (p pos) String() string { return fmt.Sprintf("%d:%d", p.seg, p.off) }

func parsePos(s string) (pos, error) {
	a, b, ok := strings.Cut(s, ":")
	seg, err1 := strconv.ParseInt(a, 10, 64)
	off, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return pos{}, fmt.Errorf("archive mark %q is not segment:offset", s)
	}
	return pos{seg, off}, nil
}

// record is one entry of the log. Data is compressed when zstd is set;
// with asRequest set it is empty and the body is the exchange's request
// body (an upstream request passed through unchanged).
type record struct {
	kind      byte
	id        string
	at        time.Time
	meta      []byte
	zstd      bool
	asRequest bool
	data      []byte
}

// A record on disk is: length (uint32, of what follows the 8-byte header),
// CRC-32C of it (uint32), kind, id length, id, time (Unix µs, varint),
// meta length (uvarint), meta, flags (1: data compressed, 2: the body is
// the request's), data.
const headerSize = 8

// appendRecord encodes r onto dst.
func appendRecord(dst []byte, r *record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	dst = append(dst, r.kind, byte(len(r.id)))
	dst = append(dst, r.id...)
	dst = binary.AppendVarint(dst, r.at.UnixMicro())
	dst = binary.AppendUvarint(dst, uint64(len(r.meta)))
	dst = append(dst, r.meta...)
	var flags byte
	if r.zstd {
		flags |= 1
	}
	if r.asRequest {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = append(dst, r.data...)
	body := dst[start+headerSize:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, crcTable))
	return dst
}

var errCorrupt = errors.New("corrupt record")

// decodeRecord decodes a record's body (after the header). The record's
// slices alias body.
func decodeRecord(body []byte) (*record, error) {
	if len(body) < 2 {
		return nil, errCorrupt
	}
	r := &record{kind: body[0]}
	n := int(body[1])
	body = body[2:]
	if len(body) < n {
		return nil, errCorrupt
	}
	r.id, body = string(body[:n]), body[n:]
	at, k := binary.Varint(body)
	if k <= 0 {
		return nil, errCorrupt
	}
	r.at, body = time.UnixMicro(at).UTC(), body[k:]
	m, k := binary.Uvarint(body)
	if k <= 0 || uint64(len(body)-k) < m+1 {
		return nil, errCorrupt
	}
	body = body[k:]
	r.meta, body = body[:m], body[m:]
	r.zstd, r.asRequest, r.data = body[0]&1 != 0, body[0]&2 != 0, body[1:]
	return r, nil
}

// segLog is the append-only log: numbered segment files in one
// directory, of which the newest takes the appends. Appends are plain
// write(2)s, never synced: a record written is in the kernel's page
// cache, which outlives the process (not the machine). It is safe for
// concurrent use.
type segLog struct {
	dir      string
	maxSize  int64
	maxAge   time.Duration
	mu       sync.Mutex
	f        *os.File
	seg      int64
	off      int64
	openedAt time.Time
}

func segName(seg int64) string { return fmt.Sprintf("%016d.log", seg) }

// segments lists the segment numbers in dir, ascending.
func segments(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if n, err := strconv.ParseInt(name, 10, 64); ok && err == nil && len(name) == 16 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// openLog opens the log in dir and starts a new segment after the
// existing ones: a process never appends to a segment another wrote.
func openLog(dir string, maxSize int64, maxAge time.Duration) (*segLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create archive directory: %w", err)
	}
	segs, err := segments(dir)
	if err != nil {
		return nil, fmt.Errorf("list archive segments: %w", err)
	}
	l := &segLog{dir: dir, maxSize: maxSize, maxAge: maxAge}
	next := int64(1)
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
	if err := l.rotate(next); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *segLog) rotate(seg int64) error {
	f, err := os.OpenFile(filepath.Join(l.dir, segName(seg)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create archive segment: %w", err)
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f, l.seg, l.off, l.openedAt = f, seg, 0, time.Now()
	return nil
}

// append writes b, one or more encoded records, with one write(2) and,
// still in log order, calls then with the position of b and the position
// after it.
func (l *segLog) append(b []byte, then func(at, next pos)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("archive is closed")
	}
	if l.off > 0 && (l.off+int64(len(b)) > l.maxSize || l.maxAge > 0 && time.Since(l.openedAt) > l.maxAge) {
		if err := l.rotate(l.seg + 1); err != nil {
			return err
		}
	}
	n, err := l.f.Write(b)
	if err != nil {
		// Take back a partial write, so the next record starts where a
		// reader expects one.
		if n > 0 {
			_ = l.f.Truncate(l.off)
		}
		return fmt.Errorf("append to archive: %w", err)
	}
	at := pos{l.seg, l.off}
	l.off += int64(n)
	if then != nil {
		then(at, pos{l.seg, l.off})
	}
	return nil
}

// active is the segment taking appends.
func (l *segLog) active() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seg
}

func (l *segLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// scan calls fn with every record from position from to the end of the
// log, in order. A segment ends at its first torn or corrupt record (the
// tail of a write the process died in).
func scan(dir string, from pos, fn func(at pos, r *record) error) error {
	segs, err := segments(dir)
	if err != nil {
		return err
	}
	for _, seg := range segs {
		if seg < from.seg {
			continue
		}
		off := int64(0)
		if seg == from.seg {
			off = from.off
		}
		if err := scanSegment(dir, seg, off, fn); err != nil {
			return err
		}
	}
	return nil
}

func scanSegment(dir string, seg, off int64, fn func(at pos, r *record) error) error {
	f, err := os.Open(filepath.Join(dir, segName(seg)))
	if errors.Is(err, os.ErrNotExist) {
		return nil // swept meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var hdr [headerSize]byte
	var body []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil // the end, or a torn header
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > maxRecord {
			return nil
		}
		body = slices.Grow(body[:0], int(n))[:n]
		if _, err := io.ReadFull(br, body); err != nil {
			return nil
		}
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
			return nil
		}
		r, err := decodeRecord(body)
		if err != nil {
			return nil
		}
		if err := fn(pos{seg, off}, r); err != nil {
			return err
		}
		off += headerSize + int64(n)
	}
}

// maxRecord bounds a record's size (a request body is at most 64 MiB).
const maxRecord = 256 << 20

// segFiles are segments open for reading, for one reader at a time.
type segFiles struct {
	dir   string
	files map[int64]*os.File
}

func (s *segFiles) get(seg int64) (*os.File, error) {
	if f := s.files[seg]; f != nil {
		return f, nil
	}
	f, err := os.Open(filepath.Join(s.dir, segName(seg)))
	if err != nil {
		return nil, err
	}
	if s.files == nil {
		s.files = map[int64]*os.File{}
	}
	s.files[seg] = f
	return f, nil
}

func (s *segFiles) close() {
	for _, f := range s.files {
		f.Close()
	}
}

// readAt reads the record at p; its slices are its own.
func (s *segFiles) readAt(p pos) (*record, error) {
	f, err := s.get(p.seg)
	if err != nil {
		return nil, err
	}
	var hdr [headerSize]byte
	if _, err := f.ReadAt(hdr[:], p.off); err != nil {
		return nil, fmt.Errorf("read archive record %s: %w", p, err)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > maxRecord {
		return nil, fmt.Errorf("read archive record %s: %w", p, errCorrupt)
	}
	body := make([]byte, n)
	if _, err := f.ReadAt(body, p.off+headerSize); err != nil {
		return nil, fmt.Errorf("read archive record %s: %w", p, err)
	}
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
		return nil, fmt.Errorf("read archive record %s: %w", p, errCorrupt)
	}
	return decodeRecord(body)
}

// encodeLocations and decodeLocations keep a list of positions compact:
// varint deltas.
func encodeLocations(ps []pos) []byte {
	var b []byte
	var prev pos
	for _, p := range ps {
		b = binary.AppendVarint(b, p.seg-prev.seg)
		b = binary.AppendVarint(b, p.off-prev.off)
		prev = p
	}
	return b
}

func decodeLocations(b []byte) ([]pos, error) {
	var out []pos
	var prev pos
	for len(b) > 0 {
		ds, n := binary.Varint(b)
		if n <= 0 {
			return nil, errCorrupt
		}
		do, m := binary.Varint(b[n:])
		if m <= 0 {
			return nil, errCorrupt
		}
		b = b[n+m:]
		prev = pos{prev.seg + ds, prev.off + do}
		out = append(out, prev)
	}
	return out, nil
}
