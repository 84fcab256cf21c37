package template

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// A file source that is plainly internal (an internal IP literal, a
// loopback name) is refused when the template is made, with 400, and
// nothing is stored; the fetch checks again whatever a name resolves to.
func TestInternalSourceRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.create(t, "taken", "alpine")
	spec := func(src string) api.TemplateSpec {
		return api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/workspace/x", Source: src}}}
	}
	for _, tt := range []struct{ src, reason string }{
		{"http://127.0.0.1:8080/api/v1/sandboxes", "127.0.0.1 is a loopback address"},
		{"http://localhost:8080/api/v1/sandboxes", "localhost is a loopback name"},
		{"http://[::1]:8080/", "::1 is a loopback address"},
		{"http://169.254.169.254/latest/meta-data/iam/", "169.254.169.254 is a link-local address"},
		{"https://10.0.0.8/secret", "10.0.0.8 is a private address"},
		{"http://0.0.0.0:8080/", "0.0.0.0 is the unspecified address"},
	} {
		t.Run(tt.src, func(t *testing.T) {
			want := "invalid spec: files[0] (/workspace/x): source " + tt.src + ": " + tt.reason + ", which template file sources may not reach"
			_, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: "new", Spec: spec(tt.src)})
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
			if err != nil && err.Error() != want {
				t.Errorf("create: %q\nwant %q", err, want)
			}
			_, err = f.svc.Update(ctx, "taken", api.UpdateTemplateRequest{Spec: spec(tt.src)})
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
			doc := "apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata: {name: imported}\nspec:\n  image: alpine\n  files: [{destination: /workspace/x, source: \"" + tt.src + "\"}]\n"
			res, err := f.svc.Import(ctx, []byte(doc), "", false)
			if err != nil || res.Failed != 1 || !strings.Contains(res.Results[0].Error, tt.reason) {
				t.Errorf("import = %+v, %v; want the item failed", res, err)
			}
			if diff := cmp.Diff([]string{"taken"}, f.names(t)); diff != "" {
				t.Errorf("stored templates changed (-want +got):\n%s", diff)
			}
			if got, _ := f.svc.Get(ctx, "taken"); got.LatestVersion != 1 {
				t.Errorf("a refused update made version %d", got.LatestVersion)
			}
		})
	}
	// Names that may resolve anywhere are checked when fetched.
	if _, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: "named", Spec: spec("https://mirror.example.com/x")}); err != nil {
		t.Errorf("create with a public name: %v", err)
	}
}
