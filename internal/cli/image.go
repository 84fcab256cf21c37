package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// imageCmd groups the image client commands.
type imageCmd struct {
	env
	// stdin is what "import -" reads; nil means os.Stdin.
	stdin io.Reader
}

func (c *imageCmd) Run(ctx context.Context, args []string) error {
	return runGroup(ctx, c.env, "image", args, map[string]subcommand{
		"ls":     {"ls [flags]", "list stored images", c.list},
		"pull":   {"pull REF [flags]", "pull an image from its registry", c.pull},
		"build":  {"build NAME [flags]", "build a built-in image: agent2env/python or agent2env/node", c.build},
		"import": {"import FILE [flags]", "import the images of a docker save or OCI layout tarball (- for stdin)", c.importTar},
		"rm":     {"rm REF... [flags]", "remove images", c.rm},
	})
}

func (c *imageCmd) list(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "[flags]", &cn)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := positional(c.env, fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	imgs, err := cl.Image.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, api.List[api.Image]{Items: imgs})
	}
	tw := table(c.stdout, "REF", "ID", "SIZE", "LAYERS", "CREATED")
	for _, img := range imgs {
		id := strings.TrimPrefix(img.ID, "sha256:")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", img.Ref, id[:min(len(id), 12)], formatBytes(img.Size), img.Layers, age(img.Created))
	}
	return tw.Flush()
}

func (c *imageCmd) pull(ctx context.Context, name string, args []string) error {
	return c.one(ctx, name, "REF", args, func(ctx context.Context, cl *client.Client, ref string, p client.ProgressFunc) (*api.Image, error) {
		return cl.Image.Pull(ctx, ref, p)
	})
}

func (c *imageCmd) build(ctx context.Context, name string, args []string) error {
	return c.one(ctx, name, "NAME", args, func(ctx context.Context, cl *client.Client, ref string, p client.ProgressFunc) (*api.Image, error) {
		return cl.Image.Build(ctx, ref, p)
	})
}

// one runs a pull or build of the image named by the one argument.
func (c *imageCmd) one(ctx context.Context, name, arg string, args []string,
	op func(context.Context, *client.Client, string, client.ProgressFunc) (*api.Image, error)) error {
	var cn conn
	fs := clientFlags(c.env, name, arg+" [flags]", &cn)
	asJSON := fs.Bool("json", false, "print the image as JSON")
	pos, err := parseArgs(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(c.env, fs, "need one %s", arg)
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	p := newProgress(c.stderr)
	img, err := op(ctx, cl, pos[0], p.update)
	p.done()
	if err != nil {
		return err
	}
	return c.printImages(*asJSON, img, []api.Image{*img})
}

func (c *imageCmd) importTar(ctx context.Context, name string, args []string) error {
	var cn conn
	fs := clientFlags(c.env, name, "FILE [flags]", &cn)
	asJSON := fs.Bool("json", false, "print the images as JSON")
	pos, err := positional(c.env, fs, args, 1, "need one FILE (- for standard input)")
	if err != nil {
		return err
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	p := newProgress(c.stderr)
	// Show the upload too: the daemon reports nothing until it has the
	// whole archive.
	up := &countingReader{r: c.stdin, p: p, item: "stdin"}
	if up.r == nil {
		up.r = os.Stdin
	}
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		up.r, up.item, up.total = f, pos[0], fi.Size()
	}
	imgs, err := cl.Image.Import(ctx, up, p.update)
	p.done()
	if err != nil {
		return err
	}
	return c.printImages(*asJSON, imgs, imgs)
}

// printImages prints v as JSON, or the refs of imgs one a line.
func (c *imageCmd) printImages(asJSON bool, v any, imgs []api.Image) error {
	if asJSON {
		return printJSON(c.stdout, v)
	}
	for _, img := range imgs {
		fmt.Fprintln(c.stdout, img.Ref)
	}
	return nil
}

// countingReader reports the bytes read through it as "upload" progress.
type countingReader struct {
	r     io.Reader
	p     *progress
	item  string
	total int64
	n     int64
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n += int64(n)
	r.p.update(api.ImageProgress{Phase: "upload", Item: r.item, Current: r.n, Total: r.total})
	return n, err
}

func (c *imageCmd) rm(ctx context.Context, name string, args []string) error {
	return removeEach(ctx, c.env, name, "REF", "image reference", args,
		func(ctx context.Context, cl *client.Client, ref string) error { return cl.Image.Remove(ctx, ref) })
}
