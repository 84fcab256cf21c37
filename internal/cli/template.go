package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// templateCmd groups the template client commands.
type templateCmd struct {
	env
	// stdin is what "-f -" reads; nil means os.Stdin.
	stdin io.Reader
}

func (c *templateCmd) Run(ctx context.Context, args []string) error {
	return runGroup(ctx, c.env, "template", args, map[string]subcommand{
		"create":   {"create -f FILE [flags]", "create a template from a YAML document or a JSON request", c.create},
		"ls":       {"ls [flags]", "list templates", c.list},
		"get":      {"get NAME [flags]", "show a template, or one of its versions", c.get},
		"update":   {"update NAME -f FILE [flags]", "make a new version of a template from a file", c.update},
		"rm":       {"rm NAME... [flags]", "remove templates and all their versions", c.rm},
		"versions": {"versions NAME [flags]", "list a template's versions", c.versions},
		"rollback": {"rollback NAME --to N [flags]", "make a new version with the spec of version N", c.rollback},
		"export":   {"export NAME [flags]", "write a template as a YAML document", c.export},
	})
}

func (c *templateCmd) create(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "-f FILE [flags]", &cn)
	file := fs.String("f", "", "`FILE`: a SandboxTemplate YAML document (as \"template export\" writes) or a JSON create request; - for stdin")
	prepull := fs.Bool("prepull", false, "start prepulling the template's image")
	asJSON := fs.Bool("json", false, "print the template as JSON")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	if *file == "" {
		return usageError(c.env, fs, "need -f FILE")
	}
	tf, err := readTemplateFile(*file, c.stdin)
	if err != nil {
		return err
	}
	req := api.CreateTemplateRequest{Name: tf.Name, DisplayName: tf.DisplayName, Description: tf.Description,
		Tags: tf.Tags, IsPublic: tf.IsPublic, Spec: tf.Spec, AutoPrepull: tf.AutoPrepull || *prepull}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	t, err := cl.Template.Create(ctx, req)
	if err != nil {
		return err
	}
	return c.printTemplates(*asJSON, t, []api.Template{*t})
}

func (c *templateCmd) list(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	var opts client.ListTemplatesOptions
	fs.StringVar(&opts.Tag, "tag", "", "list the templates carrying this tag")
	fs.StringVar(&opts.Search, "search", "", "list the templates whose name, display name or description contains this")
	fs.IntVar(&opts.Page, "page", 1, "page to list, from 1")
	fs.IntVar(&opts.PageSize, "page-size", 20, "templates a page, at most 100")
	asJSON := fs.Bool("json", false, "print the page as JSON")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	if opts.Page < 1 {
		return usageError(c.env, fs, "--page must be at least 1")
	}
	if opts.PageSize < 1 || opts.PageSize > 100 {
		return usageError(c.env, fs, "--page-size must be between 1 and 100")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	l, err := cl.Template.List(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, l)
	}
	if err := c.printTemplates(false, nil, l.Items); err != nil {
		return err
	}
	// Say where the rest is, away from the table that scripts read.
	if l.PageSize > 0 && l.Page*l.PageSize < l.Total {
		pages := (l.Total + l.PageSize - 1) / l.PageSize
		fmt.Fprintf(c.stderr, "page %d of %d (%d templates); next: --page %d\n", l.Page, pages, l.Total, l.Page+1)
	}
	return nil
}

// printTemplates prints v as JSON, or ts as a table.
func (c *templateCmd) printTemplates(asJSON bool, v any, ts []api.Template) error {
	if asJSON {
		return printJSON(c.stdout, v)
	}
	tw := table(c.stdout, "NAME", "VERSION", "IMAGE", "TAGS", "UPDATED", "DESCRIPTION")
	for _, t := range ts {
		image := ""
		if t.Spec != nil {
			image = t.Spec.Image
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", t.Name, t.LatestVersion, image, strings.Join(t.Tags, ","),
			age(t.UpdatedAt), oneLine(t.Description))
	}
	return tw.Flush()
}

func (c *templateCmd) get(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "NAME [flags]", &cn)
	version := fs.Int("version", 0, "show version `N` instead of the latest")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := positional(c.env, fs, args, 1, "need one template NAME")
	if err != nil {
		return err
	}
	if *version < 0 {
		return usageError(c.env, fs, "--version must be at least 1")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	if *version > 0 {
		v, err := cl.Template.GetVersion(ctx, pos[0], *version)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(c.stdout, v)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "Name:\t%s\n", pos[0])
		fmt.Fprintf(tw, "Version:\t%d\n", v.Version)
		field(tw, "Changelog", oneLine(v.Changelog))
		field(tw, "Created by", v.CreatedBy)
		fmt.Fprintf(tw, "Created:\t%s\n", v.CreatedAt.Format("2006-01-02 15:04:05Z07:00"))
		printSpec(tw, &v.Spec)
		return tw.Flush()
	}
	t, err := cl.Template.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, t)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", t.Name)
	field(tw, "Display name", t.DisplayName)
	field(tw, "Description", oneLine(t.Description))
	field(tw, "Tags", strings.Join(t.Tags, ", "))
	fmt.Fprintf(tw, "Public:\t%t\n", t.IsPublic)
	fmt.Fprintf(tw, "Version:\t%d\n", t.LatestVersion)
	fmt.Fprintf(tw, "Updated:\t%s\n", t.UpdatedAt.Format("2006-01-02 15:04:05Z07:00"))
	if t.Spec != nil {
		printSpec(tw, t.Spec)
	}
	return tw.Flush()
}

// field writes "key: value" unless value is empty.
func field(w io.Writer, key, value string) {
	if value != "" {
		fmt.Fprintf(w, "%s:\t%s\n", key, value)
	}
}

// printSpec writes the parts of spec that are set, one a line.
func printSpec(w io.Writer, spec *api.TemplateSpec) {
	fmt.Fprintf(w, "Image:\t%s\n", spec.Image)
	field(w, "Command", strings.Join(spec.Command, " "))
	field(w, "Args", strings.Join(spec.Args, " "))
	fmt.Fprintf(w, "Resources:\tcpu %s, memory %s\n", orDash(spec.Resources.CPU), orDash(spec.Resources.Memory))
	ttl := "never expires"
	if spec.TTL > 0 {
		ttl = fmt.Sprintf("%ds", spec.TTL)
	}
	fmt.Fprintf(w, "TTL:\t%s\n", ttl)
	if len(spec.Env) > 0 {
		keys := make([]string, 0, len(spec.Env))
		for k := range spec.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + "=" + spec.Env[k]
		}
		field(w, "Env", strings.Join(keys, " "))
	}
	field(w, "Startup script", oneLine(spec.StartupScript))
	if spec.StartupTimeout > 0 {
		fmt.Fprintf(w, "Startup timeout:\t%ds\n", spec.StartupTimeout)
	}
	for _, f := range spec.Files {
		from := f.Source
		if from == "" {
			from = fmt.Sprintf("%d bytes inline", len(f.Content))
		}
		fmt.Fprintf(w, "File:\t%s (from %s)\n", f.Destination, from)
	}
	if p := spec.ReadinessProbe; p != nil {
		fmt.Fprintf(w, "Readiness probe:\t%s (every %ds, %d failures)\n", strings.Join(p.Exec.Command, " "), p.PeriodSeconds, p.FailureThreshold)
	}
	if n := spec.Network; n != nil {
		net := "no internet access"
		if n.AllowInternetAccess {
			net = "internet access"
		}
		if len(n.AllowedDomains) > 0 {
			net += ", domains " + strings.Join(n.AllowedDomains, ", ")
		}
		fmt.Fprintf(w, "Network:\t%s\n", net)
	}
	if p := spec.Persistence; p != nil && p.Enabled {
		fmt.Fprintf(w, "Persistence:\t%s %s\n", p.Mode, p.Size)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens s to its first line, marking what was cut.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " ..."
	}
	return s
}

func (c *templateCmd) update(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "NAME -f FILE [flags]", &cn)
	file := fs.String("f", "", "`FILE`: a SandboxTemplate YAML document or a JSON request; - for stdin")
	changelog := fs.String("changelog", "", "what changed in this version (default: the file's changelog, if any)")
	asJSON := fs.Bool("json", false, "print the template as JSON")
	pos, err := positional(c.env, fs, args, 1, "need one template NAME")
	if err != nil {
		return err
	}
	if *file == "" {
		return usageError(c.env, fs, "need -f FILE")
	}
	tf, err := readTemplateFile(*file, c.stdin)
	if err != nil {
		return err
	}
	// Guard against updating one template from another's file.
	if tf.Name != "" && tf.Name != pos[0] {
		return fmt.Errorf("%s describes template %q, not %q", *file, tf.Name, pos[0])
	}
	req := api.UpdateTemplateRequest{DisplayName: tf.DisplayName, Description: tf.Description, Tags: tf.Tags,
		IsPublic: tf.IsPublic, Spec: tf.Spec, Changelog: tf.Changelog}
	if *changelog != "" {
		req.Changelog = *changelog
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	t, err := cl.Template.Update(ctx, pos[0], req)
	if err != nil {
		return err
	}
	return c.printTemplates(*asJSON, t, []api.Template{*t})
}

func (c *templateCmd) rm(ctx context.Context, name string, args []string) error {
	return removeEach(ctx, c.env, name, "NAME", "template NAME", args,
		func(ctx context.Context, cl *client.Client, n string) error { return cl.Template.Delete(ctx, n) })
}

func (c *templateCmd) versions(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "NAME [flags]", &cn)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := positional(c.env, fs, args, 1, "need one template NAME")
	if err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	l, err := cl.Template.ListVersions(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, l)
	}
	tw := table(c.stdout, "VERSION", "IMAGE", "CREATED", "CHANGELOG")
	for _, v := range l.Items {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", v.Version, v.Spec.Image, age(v.CreatedAt), oneLine(v.Changelog))
	}
	return tw.Flush()
}

func (c *templateCmd) rollback(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "NAME --to N [flags]", &cn)
	to := fs.Int("to", 0, "version `N` whose spec the new version gets")
	changelog := fs.String("changelog", "", `what the new version is for (default: "Rolled back to version N")`)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := positional(c.env, fs, args, 1, "need one template NAME")
	if err != nil {
		return err
	}
	if *to < 1 {
		return usageError(c.env, fs, "need --to N, a version from 1")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	res, err := cl.Template.Rollback(ctx, pos[0], *to, *changelog)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, res)
	}
	tw := table(c.stdout, "NAME", "VERSION", "FROM", "TO")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", res.Name, res.LatestVersion, res.RolledBackFrom, res.RolledBackTo)
	return tw.Flush()
}

func (c *templateCmd) export(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "NAME [flags]", &cn)
	version := fs.Int("version", 0, "export version `N` instead of the latest")
	out := fs.String("o", "", "write to `FILE` instead of standard output")
	pos, err := positional(c.env, fs, args, 1, "need one template NAME")
	if err != nil {
		return err
	}
	if *version < 0 {
		return usageError(c.env, fs, "--version must be at least 1")
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	b, err := cl.Template.ExportYAML(ctx, pos[0], *version)
	if err != nil {
		return err
	}
	return writeOutput(c.stdout, *out, b)
}

// writeOutput writes b to the file path, or to stdout when path is "" or -.
func writeOutput(stdout io.Writer, path string, b []byte) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// readInput returns the contents of the file path, or of stdin (nil:
// os.Stdin) when path is -.
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path != "-" {
		return os.ReadFile(path)
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return b, nil
}

// templateFile is a template as a file describes it for create and
// update: either a SandboxTemplate YAML document, as "template export"
// writes and "import" reads, or a JSON request body.
type templateFile struct {
	Name, DisplayName, Description string
	// Tags is nil when the file has none, which update keeps; an empty
	// list clears them.
	Tags        []string
	IsPublic    *bool
	Spec        api.TemplateSpec
	AutoPrepull bool   // JSON only
	Changelog   string // JSON only
}

// templateJSON is the JSON form: a CreateTemplateRequest, which may also
// carry the changelog of an update.
type templateJSON struct {
	api.CreateTemplateRequest
	Changelog string `json:"changelog,omitempty"`
}

// readTemplateFile reads and decodes the template file path (- for
// stdin). A .json file is JSON and a .yaml or .yml file YAML; otherwise a
// body starting with '{' is JSON. Unknown fields are errors, so that a
// misspelt key is not silently dropped.
func readTemplateFile(path string, stdin io.Reader) (*templateFile, error) {
	b, err := readInput(path, stdin)
	if err != nil {
		return nil, err
	}
	isJSON := bytes.HasPrefix(bytes.TrimSpace(b), []byte("{"))
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		isJSON = true
	case ".yaml", ".yml":
		isJSON = false
	}
	var tf *templateFile
	if isJSON {
		tf, err = decodeTemplateJSON(b)
	} else {
		tf, err = decodeTemplateYAML(b)
	}
	if err != nil {
		return nil, fmt.Errorf("read template file %s: %w", path, err)
	}
	return tf, nil
}

func decodeTemplateJSON(b []byte) (*templateFile, error) {
	var req templateJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	return &templateFile{Name: req.Name, DisplayName: req.DisplayName, Description: req.Description, Tags: req.Tags,
		IsPublic: req.IsPublic, Spec: req.Spec, AutoPrepull: req.AutoPrepull, Changelog: req.Changelog}, nil
}

// yamlTemplate is a SandboxTemplate document; isPublic is agent2env's
// extension, written on export only when false.
type yamlTemplate struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string   `yaml:"name"`
		DisplayName string   `yaml:"displayName"`
		Description string   `yaml:"description"`
		Tags        []string `yaml:"tags"`
		IsPublic    *bool    `yaml:"isPublic"`
	} `yaml:"metadata"`
	Spec api.TemplateSpec `yaml:"spec"`
}

// Keys that files written by older LiteBoxd versions have lower-cased
// ("startupscript"), by the mapping they appear in; the daemon's import
// accepts both spellings, and so does create -f.
var camelKeys = map[string][]string{
	"metadata":       {"displayName"},
	"spec":           {"startupScript", "startupTimeout", "readinessProbe"},
	"readinessProbe": {"initialDelaySeconds", "periodSeconds", "failureThreshold"},
	"network":        {"allowInternetAccess", "allowedDomains"},
	"persistence":    {"storageClassName", "reclaimPolicy"},
}

func decodeTemplateYAML(b []byte) (*templateFile, error) {
	// A leading or trailing "---" makes an empty document: skip those.
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		n := new(yaml.Node)
		err := dec.Decode(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !isEmptyYAML(n) {
			docs = append(docs, n)
		}
	}
	switch len(docs) {
	case 0:
		return nil, fmt.Errorf("no %s document", api.KindTemplate)
	case 1:
	default:
		return nil, errors.New(`more than one YAML document: create one template at a time, or use "agent2env import"`)
	}
	root := docs[0]
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want a %s document", api.KindTemplate)
	}
	switch kind := yamlValue(root, "kind"); {
	case kind == nil || kind.Value == "":
		return nil, fmt.Errorf("kind is missing: want %s", api.KindTemplate)
	case kind.Value == api.KindList:
		return nil, fmt.Errorf(`a %s holds many templates: use "agent2env import"`, api.KindList)
	case kind.Value != api.KindTemplate:
		return nil, fmt.Errorf("kind %q: want %s", kind.Value, api.KindTemplate)
	}
	if v := yamlValue(root, "apiVersion"); v != nil && v.Value != "" && v.Value != api.YAMLAPIVersion {
		return nil, fmt.Errorf("apiVersion %q: want %s", v.Value, api.YAMLAPIVersion)
	}
	meta, spec := yamlValue(root, "metadata"), yamlValue(root, "spec")
	renameKeys(meta, camelKeys["metadata"])
	renameKeys(spec, camelKeys["spec"])
	for _, sub := range []string{"readinessProbe", "network", "persistence"} {
		renameKeys(yamlValue(spec, sub), camelKeys[sub])
	}
	// Node.Decode cannot reject unknown keys: decode the renamed
	// document again with a strict decoder.
	norm, err := yaml.Marshal(root)
	if err != nil {
		return nil, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(norm))
	strict.KnownFields(true)
	var t yamlTemplate
	if err := strict.Decode(&t); err != nil {
		return nil, err
	}
	m := t.Metadata
	return &templateFile{Name: m.Name, DisplayName: m.DisplayName, Description: m.Description, Tags: m.Tags,
		IsPublic: m.IsPublic, Spec: t.Spec}, nil
}

// isEmptyYAML reports whether n is an empty document, such as what a
// trailing "---" makes.
func isEmptyYAML(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// yamlValue returns the value of key in the mapping n, or nil. Aliases
// are not followed: template files have no use for them.
func yamlValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// renameKeys renames the lower-cased form of each of keys in the mapping
// n to the key itself, unless the key is there already.
func renameKeys(n *yaml.Node, keys []string) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for _, key := range keys {
		if yamlValue(n, key) != nil {
			continue
		}
		if k := yamlKey(n, strings.ToLower(key)); k != nil {
			k.Value = key
		}
	}
}

// yamlKey returns the key node named key in the mapping n, or nil.
func yamlKey(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}
