package task

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the nodes one file may expand to, aliases included, so
// that a few lines of nested aliases cannot make the decoder walk billions.
const maxNodes = 1 << 20

// decoder fills a Task from a YAML node tree, checking types strictly
// (a string field takes only a string) and refusing unknown and duplicate
// keys. It records each field's node by path, for the lines of the errors
// found later.
type decoder struct {
	errs   fieldErrors
	nodes  map[string]*yaml.Node
	budget int
}

var (
	durationType = reflect.TypeFor[Duration]()
	quantityType = reflect.TypeFor[Quantity]()
)

// value decodes n into the value pointed to by ptr.
func (d *decoder) value(n *yaml.Node, ptr any, path string) {
	d.decode(n, reflect.ValueOf(ptr).Elem(), path)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.errs.add(d.nodes, path, "the file expands to more than %d values", maxNodes)
		}
		return
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.nodes[path] = n
	switch v.Type() {
	case durationType:
		d.duration(n, v, path)
		return
	case quantityType:
		d.quantity(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.object(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.typeErr(n, path, "a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.stringMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.typeErr(n, path, "a string")
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		i, ok := integer(n)
		if !ok {
			d.typeErr(n, path, "an integer")
			return
		}
		v.SetInt(i)
	default:
		panic("task: no decoder for " + v.Type().String())
	}
}

// object decodes a mapping into a struct by the fields' yaml names.
// Keys starting with "x-" are left for tools that extend the format.
func (d *decoder) object(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, path, "a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key, ok := d.key(k, path, seen)
		if !ok {
			continue
		}
		fp := join(path, key)
		f, ok := fieldByName(v, key)
		if !ok {
			if path == "" && strings.HasPrefix(key, "x-") {
				continue
			}
			d.nodes[fp] = k
			d.errs.add(d.nodes, fp, "unknown field%s", suggest(v.Type(), key))
			continue
		}
		d.decode(val, f, fp)
	}
}

// stringMap decodes a mapping of names to scalars (env, headers); numbers
// and booleans are taken as their text, as a shell would.
func (d *decoder) stringMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, path, "a mapping")
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, ok := d.key(n.Content[i], path, seen)
		if !ok {
			continue
		}
		val := n.Content[i+1]
		for val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		fp := path + "." + key
		d.nodes[fp] = val
		switch {
		case val.Kind != yaml.ScalarNode, val.Tag == "!!null":
			d.typeErr(val, fp, "a string, number or boolean")
		case val.Tag == "!!str" || val.Tag == "!!int" || val.Tag == "!!float" || val.Tag == "!!bool":
			m.SetMapIndex(reflect.ValueOf(key), reflect.ValueOf(val.Value))
		default:
			d.typeErr(val, fp, "a string, number or boolean")
		}
	}
	v.Set(m)
}

// key reads a mapping key, which must be a string seen once.
func (d *decoder) key(k *yaml.Node, path string, seen map[string]bool) (string, bool) {
	if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int" && k.Tag != "!!bool" && k.Tag != "!!float") {
		d.errs = append(d.errs, FieldError{Field: path, Line: k.Line, Column: k.Column, Message: "a key is not a string"})
		return "", false
	}
	if seen[k.Value] {
		d.errs = append(d.errs, FieldError{Field: join(path, k.Value), Line: k.Line, Column: k.Column, Message: "is given twice"})
		return "", false
	}
	seen[k.Value] = true
	return k.Value, true
}

// duration reads "30m", "1h30m" or a number of seconds. Zero and
// negative spans are refused: every duration of a task is a limit.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	var dur time.Duration
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		if !durationPattern.MatchString(n.Value) {
			d.errs.add(d.nodes, path, "%q is not a duration such as 90s, 30m or 1h30m", n.Value)
			return
		}
		var err error
		if dur, err = time.ParseDuration(n.Value); err != nil {
			d.errs.add(d.nodes, path, "%q is not a duration: %v", n.Value, err)
			return
		}
	default:
		secs, ok := integer(n)
		if !ok {
			d.typeErr(n, path, "a duration such as 30m or a number of seconds")
			return
		}
		if secs > math.MaxInt64/int64(time.Second) {
			d.errs.add(d.nodes, path, "%d seconds is too long", secs)
			return
		}
		dur = time.Duration(secs) * time.Second
	}
	if dur <= 0 {
		d.errs.add(d.nodes, path, "must be longer than zero")
		return
	}
	v.SetInt(int64(dur))
}

// quantity reads a quantity string or a number, kept as its plain
// decimal text (1e3 becomes "1000").
func (d *decoder) quantity(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!str":
			v.SetString(n.Value)
			return
		case "!!int", "!!float":
			if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				v.SetString(strconv.FormatFloat(f, 'f', -1, 64))
				return
			}
		}
	}
	d.typeErr(n, path, "a quantity such as 2, 500m or 512Mi")
}

func (d *decoder) typeErr(n *yaml.Node, path, want string) {
	d.errs.add(d.nodes, path, "must be %s, not %s", want, describe(n))
}

// integer reads an integer scalar; a float with no fraction (1.0, as JSON
// may write it) counts, as it does in JSON Schema.
func integer(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	switch n.Tag {
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return 0, false
		}
		return i, true
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!str":
		return "a string"
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return n.Value
	case "!!null":
		return "null"
	}
	return n.Tag
}

// fieldByName finds the struct field whose yaml name is name.
func fieldByName(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	return tag
}

// suggest names the field a misspelt key probably meant.
func suggest(t reflect.Type, key string) string {
	best, bestDist := "", 3
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		if dist := editDistance(strings.ToLower(key), name); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
