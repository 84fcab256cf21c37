// Package yamlerr says what is wrong with a YAML file in its reader's
// words. gopkg.in/yaml.v3's decoding errors name the Go types a file is
// decoded into ("cannot unmarshal !!str `long` into int", "field tokn not
// found in type cli.fileConfig"), which mean nothing to the file's
// writer; Explain gives the line, the key and the kind of value it takes
// instead ("ttl must be a whole number, not \"long\"", "unknown field
// tokn"). Every loader of a user's YAML (templates, the LLM proxy's
// configuration, the CLI's own file) explains its errors with it.
package yamlerr

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problem is the first thing wrong with a YAML document.
type Problem struct {
	// Line is its line in the document, 0 when yaml gave none.
	Line int
	// Msg says what is wrong, naming the key where it is known.
	Msg string
}

// Explain returns the first problem of err, an error of yaml.v3's
// Unmarshal, Decode or Node.Decode. root, when not nil, is the document's
// node tree (as Unmarshal into a yaml.Node gives it), which names the key
// a line sets.
func Explain(err error, root *yaml.Node) Problem {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return Problem{Msg: msg}
	}
	n, tail, _ := strings.Cut(rest, ":")
	line, err := strconv.Atoi(n)
	if err != nil {
		return Problem{Msg: msg}
	}
	tail = strings.TrimSpace(tail)
	if i := strings.Index(tail, " in type "); i > 0 {
		tail = tail[:i] // Go type names mean nothing to the reader
	}
	if name, ok := strings.CutPrefix(tail, "field "); ok {
		if name, ok := strings.CutSuffix(name, " not found"); ok {
			tail = "unknown field " + name
		}
	}
	if m := unmarshalMsg.FindStringSubmatch(tail); m != nil {
		tail = fmt.Sprintf("must be %s, not %s", kind(m[3]), value(m[1], m[2]))
		if key := keyAt(root, line, "!!"+m[1], m[2]); key != "" {
			tail = key + " " + tail
		}
	}
	return Problem{Line: line, Msg: tail}
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Msg)
	}
	return p.Msg
}

// unmarshalMsg is yaml's error for a value of the wrong kind, which names
// the Go type it did not fit.
var unmarshalMsg = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

// kind says which YAML values fit Go type t, as yaml names it.
func kind(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "time.Duration":
		return "a duration such as 30s or 2m"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping" // a struct
}

// value describes the value of YAML tag tag written as text.
func value(tag, text string) string {
	switch tag {
	case "str":
		return strconv.Quote(text)
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "int", "float":
		return "the number " + text
	case "bool":
		return text
	case "null":
		return "null"
	}
	return text
}

// keyAt returns the key of the innermost mapping entry whose value, of
// YAML tag tag (and, when text is not empty, written text), starts on
// line ("" if none does): what the line sets wrong. The tag and the text
// tell the keys of one line apart ("spec: {image: x, ttl: long}").
func keyAt(n *yaml.Node, line int, tag, text string) string {
	if n == nil {
		return ""
	}
	if n.Kind != yaml.MappingNode {
		for _, c := range n.Content {
			if k := keyAt(c, line, tag, text); k != "" {
				return k
			}
		}
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if inner := keyAt(v, line, tag, text); inner != "" {
			return inner
		}
		if v.Line == line && v.ShortTag() == tag && (text == "" || v.Value == text) {
			return k.Value
		}
	}
	return ""
}
