package task

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// MaxFileSize is the largest task file Load accepts.
const MaxFileSize = 10 << 20

// maxListed is how many problems an Error's message lists.
const maxListed = 20

// Error is a task file that does not load: every problem found, each with
// its field and line. It is an errdefs.ErrInvalidArgument.
type Error struct {
	// File names the task file in messages; it may be empty.
	File   string
	Fields []FieldError
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("invalid task")
	if e.File != "" {
		b.WriteString(" file " + e.File)
	}
	if len(e.Fields) == 1 {
		return b.String() + ": " + e.Fields[0].String()
	}
	fmt.Fprintf(&b, ": %d problems:", len(e.Fields))
	for i, f := range e.Fields {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  and %d more", len(e.Fields)-i)
			break
		}
		b.WriteString("\n  " + f.String())
	}
	return b.String()
}

// Is makes every Error an errdefs.ErrInvalidArgument.
func (e *Error) Is(target error) bool { return target == errdefs.ErrInvalidArgument }

// Option changes what Load checks.
type Option func(*options)

type options struct {
	models      []string
	checkModels bool
}

// WithModels makes Load refuse a model that is not one of names, the LLM
// proxy's configured models, as ModelProblem says. Without it any model
// name passes.
func WithModels(names ...string) Option {
	return func(o *options) { o.models, o.checkModels = names, true }
}

// ModelProblem says what is wrong with agent's model m, given known, the
// LLM proxy's models; "" if nothing. An agent CLI reaches no model but
// the proxy's, so its model must be one of them (none when the proxy has
// no configuration); a custom agent's model, which its entrypoint is
// given, is checked only against a proxy that has models.
func ModelProblem(agent, m string, known []string) string {
	switch {
	case m == "" || slices.Contains(known, m):
		return ""
	case len(known) > 0:
		return fmt.Sprintf("unknown model %q (the LLM proxy has %s)", m, strings.Join(known, ", "))
	case agent != AgentCustom:
		return fmt.Sprintf("unknown model %q: the LLM proxy has no models, and agent %s reaches none but its own "+
			"(start the daemon with --llm-config FILE)", m, agent)
	}
	return ""
}

// LoadFile reads and loads the task file at path; input sources are
// relative to its directory. The path is the caller's own: it may lead
// anywhere (a daemon reads the files of its tasks directory with LoadIn).
func LoadFile(path string, opts ...Option) (*Task, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errdefs.NotFound("read task file: %v", err)
		}
		return nil, fmt.Errorf("read task file: %w", err)
	}
	defer f.Close()
	return loadFrom(path, filepath.Dir(path), f, opts...)
}

// LoadIn reads and loads the task file name of the directory root, which
// its input sources are relative to. The file must be inside root after
// every symbolic link and "..": one that leads out, or is not a regular
// file, is ErrInvalidArgument; one that does not exist ErrNotFound. The
// inputs are not looked at: see CheckInputs.
func LoadIn(root *os.Root, name string, opts ...Option) (*Task, error) {
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errdefs.NotFound("read task file %s: %v", name, err)
		}
		return nil, errdefs.Invalid("read task file %s: %v", name, pathReason(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errdefs.Invalid("read task file %s: not a regular file", name)
	}
	return loadFrom(name, root.Name(), f, opts...)
}

// loadFrom loads the task file name read from r, its inputs relative to
// dir.
func loadFrom(name, dir string, r io.Reader, opts ...Option) (*Task, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read task file %s: %w", name, err)
	}
	t, err := Load(name, data, opts...)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("read task file %s: %w", name, err)
	}
	t.Dir = abs
	return t, nil
}

// CheckInputs checks that every input source of t is a regular file or a
// directory inside root (the task's directory, or the files a submission
// carried) after every symbolic link and "..": a source that leads out
// of it, or is missing, is an Error naming the input. The files are
// opened through root again when they are copied, so that a link made in
// between cannot lead out either.
func (t *Task) CheckInputs(root *os.Root) error {
	var errs fieldErrors
	for i, in := range t.Inputs {
		field := "inputs" + index(i) + ".source"
		fi, err := root.Stat(filepath.FromSlash(in.Source))
		switch {
		case errors.Is(err, os.ErrNotExist):
			errs.add(nil, field, "%q is not in the task's directory", in.Source)
		case err != nil:
			errs.add(nil, field, "%q cannot be read in the task's directory: %v", in.Source, pathReason(err))
		case !fi.Mode().IsRegular() && !fi.IsDir():
			errs.add(nil, field, "%q is not a regular file or a directory", in.Source)
		}
	}
	return errs.err("")
}

// pathReason is err without the operation and path an *fs.PathError
// wraps it in ("path escapes from parent" for a link out of an os.Root).
func pathReason(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Load decodes and validates a task file's content, YAML or JSON; name
// only labels the errors. The task's Dir is left empty.
func Load(name string, data []byte, opts ...Option) (*Task, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	fail := func(msg string, args ...any) error {
		return &Error{File: name, Fields: []FieldError{{Message: fmt.Sprintf(msg, args...)}}}
	}
	if len(data) > MaxFileSize {
		return nil, fail("the file is larger than the limit of %d MiB", MaxFileSize>>20)
	}
	root, err := parse(data)
	if err != nil {
		return nil, fail("%v", err)
	}
	d := decoder{nodes: map[string]*yaml.Node{"": root}, budget: maxNodes}
	var t Task
	d.value(root, &t, "")
	if d.budget < 0 {
		return nil, d.errs.err(name) // the task is cut short: no rule can hold
	}
	// The rules run over the type errors too, for every problem at once;
	// what they say of a field its type error left zero is dropped.
	typeErrs := len(d.errs)
	t.check(&d.errs, d.nodes)
	if p := ModelProblem(t.Agent, t.Model, o.models); o.checkModels && p != "" {
		d.errs.add(d.nodes, "model", "%s", p)
	}
	d.errs = d.errs.withoutRepeats(typeErrs)
	if err := d.errs.err(name); err != nil {
		return nil, err
	}
	t.applyDefaults()
	return &t, nil
}

// parse reads the one YAML (or JSON) document in data.
func parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, fmt.Errorf("not YAML or JSON: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("the file holds more than one YAML document")
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("the file is empty")
	}
	return doc.Content[0], nil
}

// fieldErrors collects the problems of one file.
type fieldErrors []FieldError

// add records a problem with field, placed at the field's node when nodes
// has it, else at the nearest enclosing node it has.
func (e *fieldErrors) add(nodes map[string]*yaml.Node, field, msg string, args ...any) {
	fe := FieldError{Field: field, Message: fmt.Sprintf(msg, args...)}
	for p := field; nodes != nil; p = parent(p) {
		if n, ok := nodes[p]; ok {
			fe.Line, fe.Column = n.Line, n.Column
			break
		}
		if p == "" {
			break
		}
	}
	*e = append(*e, fe)
}

// withoutRepeats drops from e[n:], the errors of the rules, those about a
// field that one of e[:n], the type errors, is about, or a field in it or
// holding it: the rule saw the value the type error left zero, and would
// only repeat it.
func (e fieldErrors) withoutRepeats(n int) fieldErrors {
	out := e[:n:n]
	for _, fe := range e[n:] {
		if !slices.ContainsFunc(e[:n], func(te FieldError) bool {
			return within(fe.Field, te.Field) || fe.Field != "" && within(te.Field, fe.Field)
		}) {
			out = append(out, fe)
		}
	}
	return out
}

// within says whether field path is field or inside it.
func within(path, field string) bool {
	return field == "" || path == field || strings.HasPrefix(path, field+".") || strings.HasPrefix(path, field+"[")
}

func (e fieldErrors) err(file string) error {
	if len(e) == 0 {
		return nil
	}
	return &Error{File: file, Fields: e}
}

// parent returns the path of the field that holds path: "inputs[0]" for
// "inputs[0].source", "inputs" for "inputs[0]", "" for "goal".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
