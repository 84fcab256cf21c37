package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newImageCmd(e env, cc *clientConfig) *cobra.Command {
	return group("image <command>", "list, pull, build, import and remove images",
		`  agent2env image pull alpine:3.20
  agent2env image build agent2env/python
  docker save myimage | agent2env image import -`,
		newImageListCmd(e, cc),
		newImageOneCmd(e, cc, "pull REF [flags]", "REF", "pull an image from its registry", "  agent2env image pull alpine:3.20",
			func(ctx context.Context, cl *client.Client, ref string, p client.ProgressFunc) (*api.Image, error) {
				return cl.Image.Pull(ctx, ref, p)
			}),
		newImageOneCmd(e, cc, "build NAME [flags]", "NAME", "build a built-in image from Debian packages: agent2env/python, agent2env/node, agent2env/code-interpreter or agent2env/agent (image ls lists them)",
			"  agent2env image build agent2env/node",
			func(ctx context.Context, cl *client.Client, ref string, p client.ProgressFunc) (*api.Image, error) {
				return cl.Image.Build(ctx, ref, p)
			}),
		newImageImportCmd(e, cc),
		removeCmd(e, cc, "REF", "image reference", "remove images", "  agent2env image rm alpine:3.20", imageRefs, func(ctx context.Context, cl *client.Client, ref string) error {
			return cl.Image.Remove(ctx, ref)
		}),
	)
}

// imageView shows images: the API's value v, a table of imgs.
func imageView(v any, imgs []api.Image) view {
	t := newTable("REF", "ID", "SIZE", "LAYERS", "CREATED", "STATUS").withWide("DIGEST")
	refs := make([]string, len(imgs))
	for i, img := range imgs {
		refs[i] = img.Ref
		if img.ID == "" { // not stored
			t.add(img.Ref, "-", "-", "-", "-", imageStatus(img), orDash(img.Digest))
			continue
		}
		id := strings.TrimPrefix(img.ID, "sha256:")
		t.add(img.Ref, id[:min(len(id), 12)], formatBytes(img.Size), fmt.Sprint(img.Layers), age(img.Created), imageStatus(img),
			orDash(img.Digest))
	}
	return view{value: v, ids: refs, table: t}
}

// imageStatus says where an image is: ready, not built yet, or being
// built or pulled and how far that is (a build's step, a layer's percent).
func imageStatus(img api.Image) string {
	switch img.Status {
	case "", api.ImageReady: // a daemon before statuses lists stored images only
		return "ready"
	case api.ImageMissing:
		return "not built yet"
	case api.ImageFailed:
		return "failed: " + img.Error
	}
	s := string(img.Status)
	switch p := img.Progress; {
	case p == nil:
	case p.Total > 0:
		s += fmt.Sprintf(": %s %d%%", p.Phase, min(100, p.Current*100/p.Total))
	case p.Current > 0:
		s += fmt.Sprintf(": %s %s", p.Phase, formatBytes(p.Current))
	case p.Phase == "build" && p.Item != "":
		s += ": " + shorten(p.Item, 40)
	default:
		s += ": " + p.Phase
	}
	return s
}

// refsText prints the references of imgs, a command's default output.
func refsText(imgs []api.Image) func(io.Writer) error {
	return func(w io.Writer) error {
		for _, img := range imgs {
			fmt.Fprintln(w, img.Ref)
		}
		return nil
	}
}

func newImageListCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list stored images",
		Example: `  agent2env image ls -o wide`,
		Args:    noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			imgs, err := cl.Image.List(ctx)
			return imageView(api.List[api.Image]{Items: imgs}, imgs), err
		}),
	}
	out.register(c, "table", tableFormats)
	return c
}

// newImageOneCmd makes pull or build: op fetches the image named by the
// one argument, showing progress on stderr.
func newImageOneCmd(e env, cc *clientConfig, use, arg, short, example string,
	op func(context.Context, *client.Client, string, client.ProgressFunc) (*api.Image, error)) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    short + ". Progress goes to stderr: a bar on a terminal, a line now and then elsewhere.",
		Example: example,
		Args:    exactArgs(1, "need one "+arg),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			p := newProgress(e.stderr)
			img, err := op(c.Context(), cl, args[0], p.update)
			p.done()
			if err != nil {
				return err
			}
			v := imageView(img, []api.Image{*img})
			v.text = refsText([]api.Image{*img})
			return out.print(e.stdout, v)
		},
	}
	out.register(c, "the image's reference", tableFormats)
	return c
}

func newImageImportCmd(e env, cc *clientConfig) *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:   "import FILE [flags]",
		Short: "import the images of a docker save or OCI layout tarball (- for stdin)",
		Example: `  agent2env image import images.tar
  docker save myimage:latest | agent2env image import -`,
		Args: exactArgs(1, "need one FILE (- for standard input)"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			p := newProgress(e.stderr)
			// Show the upload too: the daemon reports nothing until it
			// has the whole archive.
			up := &countingReader{r: e.in(), p: p, item: "stdin"}
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				fi, err := f.Stat()
				if err != nil {
					return err
				}
				up.r, up.item, up.total = f, args[0], fi.Size()
			}
			imgs, err := cl.Image.Import(c.Context(), up, p.update)
			p.done()
			if err != nil {
				return err
			}
			v := imageView(imgs, imgs)
			v.text = refsText(imgs)
			return out.print(e.stdout, v)
		},
	}
	out.register(c, "the images' references", tableFormats)
	return c
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
