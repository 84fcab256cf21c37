package wire

import (
	"encoding/json"
	"strconv"
)

// W writes JSON by hand, placing commas itself, for encoders that need
// exact control of which members appear (required empty strings, members
// that must be absent) and no reflection on hot paths. The zero value is
// ready; B holds the output.
type W struct {
	B        []byte
	stack    []w
	afterKey bool
}

type w struct {
	close byte
	first bool
}

func (j *W) comma() {
	if j.afterKey {
		j.afterKey = false
		return
	}
	if n := len(j.stack); n > 0 {
		if !j.stack[n-1].first {
			j.B = append(j.B, ',')
		}
		j.stack[n-1].first = false
	}
}

// Reset empties j for reuse, keeping its buffer.
func (j *W) Reset() { j.B, j.stack, j.afterKey = j.B[:0], j.stack[:0], false }

// Obj opens an object value.
func (j *W) Obj() *W {
	j.comma()
	j.B = append(j.B, '{')
	j.stack = append(j.stack, w{'}', true})
	return j
}

// Arr opens an array value.
func (j *W) Arr() *W {
	j.comma()
	j.B = append(j.B, '[')
	j.stack = append(j.stack, w{']', true})
	return j
}

// End closes the innermost object or array.
func (j *W) End() *W {
	n := len(j.stack) - 1
	j.B = append(j.B, j.stack[n].close)
	j.stack = j.stack[:n]
	return j
}

// Key writes a member name; the next call writes its value.
func (j *W) Key(k string) *W {
	j.comma()
	j.B = AppendString(j.B, k)
	j.B = append(j.B, ':')
	j.afterKey = true
	return j
}

// Str writes a string value.
func (j *W) Str(s string) *W { j.comma(); j.B = AppendString(j.B, s); return j }

// Int writes a number value.
func (j *W) Int(n int) *W { j.comma(); j.B = strconv.AppendInt(j.B, int64(n), 10); return j }

// Float writes a number value.
func (j *W) Float(f float64) *W {
	j.comma()
	j.B = strconv.AppendFloat(j.B, f, 'g', -1, 64)
	return j
}

// Bool writes a boolean value.
func (j *W) Bool(b bool) *W { j.comma(); j.B = strconv.AppendBool(j.B, b); return j }

// Null writes null.
func (j *W) Null() *W { j.comma(); j.B = append(j.B, "null"...); return j }

// Raw writes raw JSON as a value (null when empty).
func (j *W) Raw(raw []byte) *W {
	if len(raw) == 0 {
		return j.Null()
	}
	j.comma()
	j.B = append(j.B, raw...)
	return j
}

// Any writes v with Marshal (null on error).
func (j *W) Any(v any) *W {
	b, err := Marshal(v)
	if err != nil {
		return j.Null()
	}
	return j.Raw(b)
}

// KStr writes a string member.
func (j *W) KStr(k, s string) *W { return j.Key(k).Str(s) }

// KStrOmit writes a string member unless s is empty.
func (j *W) KStrOmit(k, s string) *W {
	if s == "" {
		return j
	}
	return j.Key(k).Str(s)
}

// KInt writes a number member.
func (j *W) KInt(k string, n int) *W { return j.Key(k).Int(n) }

// KIntOmit writes a number member unless n is 0.
func (j *W) KIntOmit(k string, n int) *W {
	if n == 0 {
		return j
	}
	return j.Key(k).Int(n)
}

// KFloat writes a number member if f is set.
func (j *W) KFloat(k string, f *float64) *W {
	if f == nil {
		return j
	}
	return j.Key(k).Float(*f)
}

// KBool writes a boolean member.
func (j *W) KBool(k string, b bool) *W { return j.Key(k).Bool(b) }

// KRaw writes a raw member unless raw is empty.
func (j *W) KRaw(k string, raw json.RawMessage) *W {
	if len(raw) == 0 {
		return j
	}
	return j.Key(k).Raw(raw)
}

// KObj opens an object member.
func (j *W) KObj(k string) *W { return j.Key(k).Obj() }

// KArr opens an array member.
func (j *W) KArr(k string) *W { return j.Key(k).Arr() }

// Extra writes fields as members, except those written already says were.
func (j *W) Extra(fields []Field, written func(string) bool) *W {
	for _, f := range fields {
		if len(f.Value) == 0 || (written != nil && written(f.Name)) {
			continue
		}
		j.Key(f.Name).Raw(f.Value)
	}
	return j
}

// Bytes returns the output so far.
func (j *W) Bytes() []byte { return j.B }
