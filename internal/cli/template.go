package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/jsonbody"
	tmpl "github.com/agent2env/agent2env/internal/template"
)

func newTemplateCmd(e env, cc *clientConfig) *cobra.Command {
	return group("template <command>", "create, list, update, version, roll back and export sandbox templates",
		`  agent2env template create -f python-ds.yaml
  agent2env template ls --tag python
  agent2env template rollback python-ds --to 1`,
		newTemplateCreateCmd(e, cc), newTemplateListCmd(e, cc), newTemplateGetCmd(e, cc), newTemplateUpdateCmd(e, cc),
		removeCmd(e, cc, "NAME", "template NAME", "remove templates and all their versions",
			"  agent2env template rm python-ds", templateNames,
			func(ctx context.Context, cl *client.Client, n string) error { return cl.Template.Delete(ctx, n) }),
		newTemplateVersionsCmd(e, cc), newTemplateRollbackCmd(e, cc), newTemplateExportCmd(e, cc),
	)
}

// templateView shows templates: the API's value v, a table of ts.
func templateView(v any, ts []api.Template) view {
	t := newTable("NAME", "VERSION", "IMAGE", "TAGS", "UPDATED", "DESCRIPTION").withWide("DISPLAY NAME", "PUBLIC", "CPU", "MEMORY", "TTL")
	names := make([]string, len(ts))
	for i, tp := range ts {
		names[i] = tp.Name
		spec := tp.Spec
		if spec == nil {
			spec = &api.TemplateSpec{}
		}
		t.add(tp.Name, strconv.Itoa(tp.LatestVersion), spec.Image, strings.Join(tp.Tags, ","), age(tp.UpdatedAt),
			oneLine(tp.Description), orDash(tp.DisplayName), strconv.FormatBool(tp.IsPublic),
			orDash(spec.Resources.CPU), orDash(spec.Resources.Memory), fmt.Sprintf("%ds", spec.TTL))
	}
	return view{value: v, ids: names, table: t}
}

func newTemplateCreateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		file    string
		prepull bool
		out     output
	)
	c := &cobra.Command{
		Use:   "create -f FILE [flags]",
		Short: "create a template from a YAML document or a JSON request",
		Example: `  agent2env template create -f python-ds.yaml --prepull
  agent2env template export py | sed 's/name: py/name: py2/' | agent2env template create -f -`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf(c, "need -f FILE")
			}
			tf, err := readTemplateFile(file, e.in())
			if err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			t, err := cl.Template.Create(c.Context(), api.CreateTemplateRequest{Name: tf.Name, DisplayName: tf.DisplayName,
				Description: tf.Description, Tags: tf.Tags, IsPublic: tf.IsPublic, Spec: tf.Spec, AutoPrepull: tf.AutoPrepull || prepull})
			if err != nil {
				return err
			}
			return out.print(e.stdout, templateView(t, []api.Template{*t}))
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "`FILE`: a SandboxTemplate document, YAML or JSON (as \"template export\" writes), or a JSON create request; - for stdin")
	c.Flags().BoolVar(&prepull, "prepull", false, "start prepulling the template's image")
	out.register(c, "table", tableFormats)
	return c
}

func newTemplateListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		opts client.ListTemplatesOptions
		out  output
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list templates",
		Long:    "ls lists one page of templates; stderr says how to get the next one.",
		Example: `  agent2env template ls --tag python -o wide
  agent2env template ls --page-size 100 -o json | jq -r '.items[].name'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Page < 1 {
				return usageErrorf(c, "--page must be at least 1")
			}
			if opts.PageSize < 1 || opts.PageSize > 100 {
				return usageErrorf(c, "--page-size must be between 1 and 100")
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			l, err := cl.Template.List(c.Context(), opts)
			if err != nil {
				return err
			}
			if err := out.print(e.stdout, templateView(l, l.Items)); err != nil {
				return err
			}
			// Say where the rest is, away from the table that scripts read.
			if !out.structured() && l.PageSize > 0 && l.Page*l.PageSize < l.Total {
				pages := (l.Total + l.PageSize - 1) / l.PageSize
				fmt.Fprintf(e.stderr, "page %d of %d (%d templates); next: --page %d\n", l.Page, pages, l.Total, l.Page+1)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&opts.Tag, "tag", "", "list the templates carrying this tag")
	f.StringVar(&opts.Search, "search", "", "list the templates whose name, display name or description contains this")
	f.IntVar(&opts.Page, "page", 1, "page to list, from 1")
	f.IntVar(&opts.PageSize, "page-size", 20, "templates a page, at most 100")
	out.register(c, "table", tableFormats)
	return c
}

func newTemplateGetCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		version int
		out     output
	)
	c := &cobra.Command{
		Use:   "get NAME [flags]",
		Short: "show a template, or one of its versions",
		Example: `  agent2env template get python-ds
  agent2env template get python-ds --version 2 -o yaml`,
		Args:              exactArgs(1, "need one template NAME"),
		ValidArgsFunction: cc.complete(e, templateNames, false),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkVersion(c, "version", version); err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			if version > 0 {
				v, err := cl.Template.GetVersion(c.Context(), args[0], version)
				if err != nil {
					return err
				}
				vv := versionView(v, []api.TemplateVersion{*v})
				vv.text = func(w io.Writer) error { return writeVersion(w, args[0], v) }
				return out.print(e.stdout, vv)
			}
			t, err := cl.Template.Get(c.Context(), args[0])
			if err != nil {
				return err
			}
			v := templateView(t, []api.Template{*t})
			v.text = func(w io.Writer) error { return writeTemplate(w, t) }
			return out.print(e.stdout, v)
		},
	}
	c.Flags().IntVar(&version, "version", 0, "show version `N` instead of the latest")
	out.register(c, "the template's fields, one a line", tableFormats)
	return c
}

// writeTemplate writes t's fields, one a line.
func writeTemplate(w io.Writer, t *api.Template) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
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

// writeVersion writes the fields of version v of template name.
func writeVersion(w io.Writer, name string, v *api.TemplateVersion) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", name)
	fmt.Fprintf(tw, "Version:\t%d\n", v.Version)
	field(tw, "Changelog", oneLine(v.Changelog))
	field(tw, "Created by", v.CreatedBy)
	fmt.Fprintf(tw, "Created:\t%s\n", v.CreatedAt.Format("2006-01-02 15:04:05Z07:00"))
	printSpec(tw, &v.Spec)
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
		line := strings.TrimSpace(p.Mode + " " + p.Size)
		if p.StorageClassName != "" {
			line += ", storage class " + p.StorageClassName
		}
		if p.ReclaimPolicy != "" {
			line += ", " + p.ReclaimPolicy + " on delete"
		}
		fmt.Fprintf(w, "Persistence:\t%s\n", line)
	}
	field(w, "Runtime class", spec.RuntimeClassName)
}

func newTemplateUpdateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		file, changelog string
		out             output
	)
	c := &cobra.Command{
		Use:               "update NAME -f FILE [flags]",
		Short:             "make a new version of a template from a file",
		Example:           `  agent2env template update python-ds -f python-ds.yaml --changelog "python 3.13"`,
		Args:              exactArgs(1, "need one template NAME"),
		ValidArgsFunction: cc.complete(e, templateNames, false),
		RunE: func(c *cobra.Command, args []string) error {
			if file == "" {
				return usageErrorf(c, "need -f FILE")
			}
			tf, err := readTemplateFile(file, e.in())
			if err != nil {
				return err
			}
			// Guard against updating one template from another's file.
			if tf.Name != "" && tf.Name != args[0] {
				return fmt.Errorf("%s describes template %q, not %q", file, tf.Name, args[0])
			}
			req := api.UpdateTemplateRequest{DisplayName: tf.DisplayName, Description: tf.Description, Tags: tf.Tags,
				IsPublic: tf.IsPublic, Spec: tf.Spec, Changelog: cmp.Or(changelog, tf.Changelog)}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			t, err := cl.Template.Update(c.Context(), args[0], req)
			if err != nil {
				return err
			}
			return out.print(e.stdout, templateView(t, []api.Template{*t}))
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "`FILE`: a SandboxTemplate document, YAML or JSON (as \"template export\" writes), or a JSON request; - for stdin")
	c.Flags().StringVar(&changelog, "changelog", "", "what changed in this version (default: the file's changelog, if any)")
	out.register(c, "table", tableFormats)
	return c
}

// versionView shows template versions: the API's value v, a table of vs.
func versionView(v any, vs []api.TemplateVersion) view {
	t := newTable("VERSION", "IMAGE", "CREATED", "CHANGELOG").withWide("CREATED BY")
	ids := make([]string, len(vs))
	for i, tv := range vs {
		ids[i] = strconv.Itoa(tv.Version)
		t.add(ids[i], tv.Spec.Image, age(tv.CreatedAt), oneLine(tv.Changelog), orDash(tv.CreatedBy))
	}
	return view{value: v, ids: ids, table: t}
}

func newTemplateVersionsCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		out  output
		page pageFlags
	)
	c := &cobra.Command{
		Use:   "versions NAME [flags]",
		Short: "list a template's versions, newest first (or oldest first)",
		Example: `  agent2env template versions python-ds
  agent2env template versions python-ds --limit 20 --cursor "$NEXT" -o json`,
		Args:              exactArgs(1, "need one template NAME"),
		ValidArgsFunction: cc.complete(e, templateNames, false),
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, args []string) (view, error) {
			l, err := cl.Template.ListVersionsPage(ctx, args[0],
				client.ListVersionsOptions{Limit: int(page.limit), Cursor: page.cursor, Order: page.order()})
			if err != nil {
				return view{}, err
			}
			return versionView(l, l.Items), nil
		}),
	}
	page.register(c, "versions", "next_cursor", true)
	out.register(c, "table", tableFormats)
	return c
}

func newTemplateRollbackCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		to        int
		changelog string
		out       output
	)
	c := &cobra.Command{
		Use:               "rollback NAME --to N [flags]",
		Short:             "make a new version with the spec of version N",
		Example:           `  agent2env template rollback python-ds --to 1 --changelog "numpy 2 broke the notebooks"`,
		Args:              exactArgs(1, "need one template NAME"),
		ValidArgsFunction: cc.complete(e, templateNames, false),
		RunE: func(c *cobra.Command, args []string) error {
			if to < 1 {
				return usageErrorf(c, "need --to N, a version from 1")
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			res, err := cl.Template.Rollback(c.Context(), args[0], to, changelog)
			if err != nil {
				return err
			}
			t := newTable("NAME", "VERSION", "FROM", "TO")
			t.add(res.Name, strconv.Itoa(res.LatestVersion), strconv.Itoa(res.RolledBackFrom), strconv.Itoa(res.RolledBackTo))
			return out.print(e.stdout, view{value: res, ids: []string{res.Name}, table: t})
		},
	}
	c.Flags().IntVar(&to, "to", 0, "version `N` whose spec the new version gets")
	c.Flags().StringVar(&changelog, "changelog", "", `what the new version is for (default: "Rolled back to version N")`)
	out.register(c, "table", tableFormats)
	return c
}

func newTemplateExportCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		version int
		out     exportOutput
	)
	c := &cobra.Command{
		Use:   "export NAME [flags]",
		Short: "write a template as a YAML document",
		Long: `export writes a template as a SandboxTemplate YAML document, which "template create -f"
and "import" read, to standard output or, with -f, to a file. ` + exportFormats,
		Example: `  agent2env template export python-ds > python-ds.yaml
  agent2env template export python-ds -f python-ds.yaml
  agent2env template export python-ds -o json | jq .spec`,
		Args:              exactArgs(1, "need one template NAME"),
		ValidArgsFunction: cc.complete(e, templateNames, false),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkVersion(c, "version", version); err != nil {
				return err
			}
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			b, err := cl.Template.ExportYAML(c.Context(), args[0], version)
			if err != nil {
				return err
			}
			return out.write(e.stdout, b)
		},
	}
	c.Flags().IntVar(&version, "version", 0, "export version `N` instead of the latest")
	out.register(c)
	return c
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
// update: either a SandboxTemplate document, in YAML or JSON, as "template
// export" writes and "import" reads, or a JSON request body.
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
// body starting with '{' is JSON. JSON with a kind or an apiVersion is a
// SandboxTemplate document, as "template export -o json" writes it, and
// other JSON a request body. Unknown fields are errors, so that a misspelt
// key is not silently dropped.
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
	if isJSON && !isDocumentJSON(b) {
		tf, err = decodeTemplateJSON(b)
	} else {
		tf, err = decodeTemplateYAML(b)
	}
	if err != nil {
		return nil, fmt.Errorf("read template file %s: %w", path, err)
	}
	return tf, nil
}

// isDocumentJSON reports whether the JSON object b is a document (it has
// a kind or an apiVersion, which no request body has): YAML's parser,
// which reads JSON, decodes it as one.
func isDocumentJSON(b []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) != nil {
		return false // decodeTemplateJSON says what is wrong
	}
	_, kind := keys["kind"]
	_, version := keys["apiVersion"]
	return kind || version
}

func decodeTemplateJSON(b []byte) (*templateFile, error) {
	var req templateJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		// A value of the wrong kind is named by its member and the
		// JSON that fits, not by Go's types; the member's path starts
		// with the embedded request's type, which is no member. JSON
		// that does not parse is named by its line and column.
		err = jsonbody.Explain(jsonbody.Locate(err, b), "the file")
		if kind := (*jsonbody.KindError)(nil); errors.As(err, &kind) {
			kind.Member = strings.TrimPrefix(kind.Member, "CreateTemplateRequest.")
		}
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	return &templateFile{Name: req.Name, DisplayName: req.DisplayName, Description: req.Description, Tags: req.Tags,
		IsPublic: req.IsPublic, Spec: req.Spec, AutoPrepull: req.AutoPrepull, Changelog: req.Changelog}, nil
}

func decodeTemplateYAML(b []byte) (*templateFile, error) {
	d, err := tmpl.ParseDocument(b)
	if err != nil {
		return nil, err
	}
	return &templateFile{Name: d.Name, DisplayName: d.DisplayName, Description: d.Description, Tags: d.Tags,
		IsPublic: d.IsPublic, Spec: d.Spec}, nil
}
