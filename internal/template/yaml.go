package template

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/yamlerr"
)

// document is one SandboxTemplate YAML document, as LiteBoxd writes it.
type document struct {
	APIVersion string           `yaml:"apiVersion"`
	Kind       string           `yaml:"kind"`
	Metadata   metadata         `yaml:"metadata"`
	Spec       api.TemplateSpec `yaml:"spec"`
}

// metadata names and describes a template in a document. IsPublic is an
// agent2env extension, written only when false so that documents of
// public templates stay exactly LiteBoxd's; LiteBoxd ignores it.
type metadata struct {
	Name        string   `yaml:"name"`
	DisplayName string   `yaml:"displayName"`
	Description string   `yaml:"description"`
	Tags        []string `yaml:"tags"`
	IsPublic    *bool    `yaml:"isPublic,omitempty"`
}

// listDocument is a SandboxTemplateList: items are full documents.
type listDocument struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	ExportedAt time.Time  `yaml:"exportedAt,omitempty"`
	Items      []document `yaml:"items"`
}

// rawDocument is a document being imported: either kind, the parts
// decoded later so that one bad item fails alone.
type rawDocument struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   yaml.Node   `yaml:"metadata"`
	Spec       yaml.Node   `yaml:"spec"`
	Items      []yaml.Node `yaml:"items"`
}

// importItem is one template of an import: decoded, or err.
type importItem struct {
	meta metadata
	spec api.TemplateSpec
	err  error
}

func toDocument(t *store.Template, spec api.TemplateSpec) document {
	d := document{
		APIVersion: api.YAMLAPIVersion, Kind: api.KindTemplate,
		Metadata: metadata{Name: t.Name, DisplayName: t.DisplayName, Description: t.Description, Tags: t.Tags},
		Spec:     spec,
	}
	if d.Metadata.Tags == nil {
		d.Metadata.Tags = []string{}
	}
	if !t.IsPublic {
		d.Metadata.IsPublic = new(bool)
	}
	return d
}

// marshalYAML encodes v as YAML that reads back as v. yaml.v3 writes some
// strings in a form it cannot read back (Unreadable), and encoding into a
// yaml.Node goes through that text: v is made a node tree here (toNode),
// those strings double-quoted, and the tree encoded.
func marshalYAML(v any) ([]byte, error) {
	n, err := make(nodeEncoder).toNode(reflect.ValueOf(v))
	if err == nil {
		var b []byte
		if b, err = yaml.Marshal(n); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("encode YAML: %w", err)
}

// nodeEncoder makes node trees of values. It keeps the style of each
// string it encoded: an export repeats its keys and many values, and
// finding a string's style encodes it.
type nodeEncoder map[string]yaml.Style

// toNode is v as a node tree, as yaml.v3 encodes it: structs by their
// yaml tags (a name and omitempty), string-keyed maps in key order,
// pointers, slices, strings (stringNode); other values (numbers, booleans,
// times) by yaml.v3 itself.
func (e nodeEncoder) toNode(v reflect.Value) (*yaml.Node, error) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
		}
		return e.toNode(v.Elem())
	case reflect.String:
		return e.stringNode(v.String()), nil
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i := range v.Len() {
			c, err := e.toNode(v.Index(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		return n, nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map of %s: only string keys are encoded", v.Type().Key())
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i].String(), keys[j].String()) })
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range keys {
			c, err := e.toNode(v.MapIndex(k))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, e.stringNode(k.String()), c)
		}
		return n, nil
	case reflect.Struct:
		if _, ok := v.Interface().(time.Time); ok {
			break
		}
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" || opts == "omitempty" && isEmpty(v.Field(i)) {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			c, err := e.toNode(v.Field(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, e.stringNode(name), c)
		}
		return n, nil
	}
	n := new(yaml.Node)
	if err := n.Encode(v.Interface()); err != nil {
		return nil, err
	}
	return n, nil
}

// keyLess is yaml.v3's order of a mapping's string keys: runs of digits
// compare as numbers, and letters before other characters (as yaml.v3's
// keyList.Less, whose string part this is).
func keyLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	digits := false
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			digits = unicode.IsDigit(ar[i])
			continue
		}
		al, bl := unicode.IsLetter(ar[i]), unicode.IsLetter(br[i])
		switch {
		case al && bl:
			return ar[i] < br[i]
		case al || bl:
			if digits {
				return al
			}
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}

// Unreadable reports whether yaml.v3 writes s in a form that it does not
// read back as s: "<<" plain is a merge key, and a multi-line string whose
// first line starts with white space or is empty is a literal block with
// an indentation indicator that yaml.v3 then rejects or reads as another
// string. Double-quoted, such a string reads back.
func Unreadable(s string) bool {
	return s == "<<" || strings.Contains(s, "\n") && strings.IndexFunc(s, unicode.IsSpace) == 0
}

// quoteUnreadable double-quotes the strings of the node tree n that are
// Unreadable, so that n encodes as YAML that reads back as n.
func quoteUnreadable(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && Unreadable(n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		quoteUnreadable(c)
	}
}

// isEmpty is yaml.v3's omitempty: zero, an empty slice or map, a zero
// time.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	if t, ok := v.Interface().(time.Time); ok {
		return t.IsZero()
	}
	return v.IsZero()
}

// stringNode is the scalar node of s, in the style yaml.v3 writes it in
// (plain, quoted, a literal block), except where that style does not read
// back as s (Unreadable): then double-quoted.
func (e nodeEncoder) stringNode(s string) *yaml.Node {
	style, ok := e[s]
	if !ok {
		style = yaml.DoubleQuotedStyle
		var n yaml.Node
		if err := n.Encode(s); err == nil && n.Kind == yaml.ScalarNode && n.Value == s && !Unreadable(s) {
			style = n.Style
		}
		e[s] = style
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: style}
}

func invalidYAML(format string, args ...any) error {
	return errdefs.WithCode(errdefs.Invalid("invalid YAML format: "+format, args...), api.CodeInvalidYAML)
}

// MaxImportItems bounds the templates of one import, so that a small file
// of empty items cannot make the server do millions of them.
const MaxImportItems = 10000

// Bounds on the work of decoding one import. yaml.v3 checks the keys of
// each mapping for duplicates in time quadratic in their number, and
// expands aliases each time they are decoded: without a bound a 10 MiB
// file can keep the server busy for hours.
const (
	maxYAMLNodes   = 1 << 22 // nodes, counting those reached through aliases again
	maxYAMLKeyWork = 1 << 27 // the sum of the squared sizes of the mappings
	maxYAMLDepth   = 10000
)

// yamlBudget is what is left of the bounds.
type yamlBudget struct{ nodes, keyWork int }

// spend walks n as decoding it would and reports whether the budget
// covers it.
func (b *yamlBudget) spend(n *yaml.Node, depth int) bool {
	if n == nil {
		return true
	}
	b.nodes--
	if b.nodes < 0 || depth > maxYAMLDepth {
		return false
	}
	switch n.Kind {
	case yaml.AliasNode:
		return b.spend(n.Alias, depth+1)
	case yaml.MappingNode:
		k := len(n.Content) / 2
		if b.keyWork -= k * k; b.keyWork < 0 {
			return false
		}
	}
	for _, c := range n.Content {
		if !b.spend(c, depth+1) {
			return false
		}
	}
	return true
}

// parseImport reads the templates of data: a SandboxTemplate, a
// SandboxTemplateList, or a stream of them separated by "---". Errors of
// the YAML itself, of a document's kind or apiVersion, a stream without
// documents and one of more than MaxImportItems templates fail the whole
// import (ErrInvalidArgument); errors of one item's metadata or spec are
// kept in that item.
func parseImport(data []byte) ([]importItem, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	items := []importItem{}
	docs := 0
	budget := &yamlBudget{nodes: maxYAMLNodes, keyWork: maxYAMLKeyWork}
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalidYAML("%v", err)
		}
		if isNull(&n) {
			continue // an empty document, such as a leading "---"
		}
		docs++
		if !budget.spend(&n, 0) {
			return nil, invalidYAML("document %d: too many nodes, keys or aliases to decode", i)
		}
		// Count before decoding: decoding copies every item.
		count := 1
		if list := mappingValue(&n, "items"); list != nil && list.Kind == yaml.SequenceNode {
			count = len(list.Content)
		}
		if len(items)+count > MaxImportItems {
			return nil, errdefs.Invalid("too many templates: at most %d in one import", MaxImportItems)
		}
		var raw rawDocument
		if err := n.Decode(&raw); err != nil {
			return nil, invalidYAML("document %d: %v", i, err)
		}
		if raw.APIVersion != "" && raw.APIVersion != api.YAMLAPIVersion {
			return nil, errdefs.Invalid("document %d: invalid apiVersion: expected %s, got %s", i, api.YAMLAPIVersion, raw.APIVersion)
		}
		switch raw.Kind {
		case api.KindList:
			for j := range raw.Items {
				items = append(items, decodeItem(&raw.Items[j]))
			}
		case api.KindTemplate:
			items = append(items, decodeRaw(&raw))
		default:
			return nil, errdefs.Invalid("document %d: invalid kind: expected %s or %s, got %q", i, api.KindTemplate, api.KindList, raw.Kind)
		}
	}
	if docs == 0 {
		return nil, invalidYAML("no %s or %s document", api.KindTemplate, api.KindList)
	}
	return items, nil
}

func isNull(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// decodeItem decodes one entry of a list's items.
func decodeItem(n *yaml.Node) importItem {
	var raw rawDocument
	if err := n.Decode(&raw); err != nil {
		return importItem{meta: metadata{Name: scalarField(n, "metadata", "name")}, err: fmt.Errorf("invalid YAML: %s", yamlerr.Explain(err, n))}
	}
	it := decodeRaw(&raw)
	if it.err == nil && raw.APIVersion != "" && raw.APIVersion != api.YAMLAPIVersion {
		it.err = fmt.Errorf("invalid apiVersion: expected %s, got %s", api.YAMLAPIVersion, raw.APIVersion)
	}
	if it.err == nil && raw.Kind != "" && raw.Kind != api.KindTemplate {
		it.err = fmt.Errorf("invalid kind: expected %s, got %s", api.KindTemplate, raw.Kind)
	}
	return it
}

// decodeRaw decodes the metadata and spec of a SandboxTemplate document.
func decodeRaw(raw *rawDocument) importItem {
	var it importItem
	if !isNull(&raw.Metadata) {
		renameKeys(&raw.Metadata, metadataKeys)
		if err := raw.Metadata.Decode(&it.meta); err != nil {
			it.meta = metadata{Name: scalarField(&raw.Metadata, "name")}
			it.err = fmt.Errorf("invalid YAML: metadata: %s", yamlerr.Explain(err, &raw.Metadata))
			return it
		}
	}
	if !isNull(&raw.Spec) {
		renameSpecKeys(&raw.Spec)
		if err := raw.Spec.Decode(&it.spec); err != nil {
			it.err = fmt.Errorf("invalid YAML: spec: %s", yamlerr.Explain(err, &raw.Spec))
		}
	}
	return it
}

// scalarField returns the string at path in the mapping n, or "".
func scalarField(n *yaml.Node, path ...string) string {
	for _, key := range path {
		n = mappingValue(n, key)
		if n == nil {
			return ""
		}
	}
	if n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// mappingValue returns the value of key in the mapping n (following an
// alias), or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && depth < 8; depth++ {
		switch n.Kind {
		case yaml.AliasNode:
			n = n.Alias
		case yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		default:
			return n
		}
	}
	return n
}

// Keys of the spec and its parts. Files written by older LiteBoxd
// versions have them lower-cased ("startupscript"); renameKeys accepts
// both.
var (
	metadataKeys    = []string{"displayName"}
	specKeys        = []string{"startupScript", "startupTimeout", "readinessProbe"}
	probeKeys       = []string{"initialDelaySeconds", "periodSeconds", "failureThreshold"}
	networkKeys     = []string{"allowInternetAccess", "allowedDomains"}
	persistenceKeys = []string{"storageClassName", "reclaimPolicy"}
)

func renameSpecKeys(spec *yaml.Node) {
	renameKeys(spec, specKeys)
	renameKeys(mappingValue(spec, "readinessProbe"), probeKeys)
	renameKeys(mappingValue(spec, "network"), networkKeys)
	renameKeys(mappingValue(spec, "persistence"), persistenceKeys)
}

// renameKeys renames the lower-cased form of each of keys in the mapping
// n to the key itself, unless the key is already there.
func renameKeys(n *yaml.Node, keys []string) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for _, key := range keys {
		lower := strings.ToLower(key)
		if mappingValue(n, key) != nil {
			continue
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == lower {
				k.Value = key
				break
			}
		}
	}
}

// Document is one template as a SandboxTemplate YAML file describes it,
// for clients that create or update a single template from a file.
type Document struct {
	Name, DisplayName, Description string
	// Tags is nil when the document has none, and empty when it lists
	// none: an update keeps the first and clears the second.
	Tags     []string
	IsPublic *bool
	Spec     api.TemplateSpec
}

// ParseDocument reads data holding exactly one SandboxTemplate document
// (empty documents, such as a leading or trailing "---", are skipped).
// Unlike an import it is strict: a SandboxTemplateList, a second
// document and a key the format does not know are errors, so that a
// misspelt key is not silently dropped. The lower-cased keys of older
// LiteBoxd files are accepted, as an import accepts them.
func ParseDocument(data []byte) (*Document, error) {
	var root *yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	budget := &yamlBudget{nodes: maxYAMLNodes, keyWork: maxYAMLKeyWork}
	for {
		n := new(yaml.Node)
		err := dec.Decode(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalidYAML("%v", err)
		}
		if isNull(n) {
			continue
		}
		if root != nil {
			return nil, errdefs.Invalid(`more than one YAML document: create one template at a time, or use "agent2env import"`)
		}
		if !budget.spend(n, 0) {
			return nil, invalidYAML("too many nodes, keys or aliases to decode")
		}
		root = n
	}
	if root == nil {
		return nil, errdefs.Invalid("no %s document", api.KindTemplate)
	}
	if deref(root).Kind != yaml.MappingNode {
		return nil, errdefs.Invalid("want a %s document", api.KindTemplate)
	}
	switch kind := scalarField(root, "kind"); kind {
	case "":
		return nil, errdefs.Invalid("kind is missing: want %s", api.KindTemplate)
	case api.KindList:
		return nil, errdefs.Invalid(`a %s holds many templates: use "agent2env import"`, api.KindList)
	case api.KindTemplate:
	default:
		return nil, errdefs.Invalid("kind %q: want %s", kind, api.KindTemplate)
	}
	if v := scalarField(root, "apiVersion"); v != "" && v != api.YAMLAPIVersion {
		return nil, errdefs.Invalid("apiVersion %q: want %s", v, api.YAMLAPIVersion)
	}
	renameKeys(mappingValue(root, "metadata"), metadataKeys)
	renameSpecKeys(mappingValue(root, "spec"))
	// Node.Decode cannot reject unknown keys: decode the renamed document
	// again with a strict decoder.
	quoteUnreadable(root)
	norm, err := yaml.Marshal(root)
	if err != nil {
		return nil, invalidYAML("%v", err)
	}
	strict := yaml.NewDecoder(bytes.NewReader(norm))
	strict.KnownFields(true)
	var d document
	if err := strict.Decode(&d); err != nil {
		// Its lines are norm's, not the file's: the key says where.
		var normRoot yaml.Node
		_ = yaml.Unmarshal(norm, &normRoot)
		return nil, invalidYAML("%s", yamlerr.Explain(err, &normRoot).Msg)
	}
	m := d.Metadata
	return &Document{Name: m.Name, DisplayName: m.DisplayName, Description: m.Description, Tags: m.Tags,
		IsPublic: m.IsPublic, Spec: d.Spec}, nil
}
