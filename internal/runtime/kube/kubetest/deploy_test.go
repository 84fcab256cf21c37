package kubetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeployManifests applies deploy/kubernetes to a real API server, as a
// server-side dry run and then for real, and checks that the daemon's
// service account may do what the kubernetes runtime needs in its
// namespace, and nothing else.
func TestDeployManifests(t *testing.T) {
	c := Start(t, Options{})
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "kubernetes")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A dry run creates no namespace for the others to go in: make it.
	if _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(dir, "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "apply", "-k", dir, "--dry-run=server"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "apply", "-k", dir); err != nil {
		t.Fatal(err)
	}

	d, err := c.Client.AppsV1().Deployments("agent2env").Get(ctx, "agent2env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	main := pod.Containers[0]
	got := map[string]any{
		"serviceAccount": pod.ServiceAccountName,
		"readiness":      main.ReadinessProbe.HTTPGet.Path,
		"liveness":       main.LivenessProbe.HTTPGet.Path,
		"nonRoot":        *pod.SecurityContext.RunAsNonRoot,
		"readOnlyRoot":   *main.SecurityContext.ReadOnlyRootFilesystem,
		"data":           pod.Volumes[0].PersistentVolumeClaim.ClaimName,
	}
	want := map[string]any{
		"serviceAccount": "agent2env", "readiness": "/readyz", "liveness": "/health",
		"nonRoot": true, "readOnlyRoot": true, "data": "agent2env-data",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the daemon's Deployment (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		ns, verb, group, resource, sub string
		allowed                        bool
	}{
		{"agent2env", "create", "", "pods", "", true},
		{"agent2env", "watch", "", "pods", "", true},
		{"agent2env", "delete", "", "pods", "", true},
		{"agent2env", "patch", "", "pods", "", true}, // the start gate
		{"agent2env", "create", "", "secrets", "", true},
		{"agent2env", "create", "", "persistentvolumeclaims", "", true},
		{"agent2env", "create", "networking.k8s.io", "networkpolicies", "", true},
		{"agent2env", "create", "apps", "daemonsets", "", true},
		// Nothing it does not use: no exec, no port-forward in the cluster,
		// no reading of other Secrets, no other workloads, no RBAC.
		{"agent2env", "create", "", "pods", "exec", false},
		{"agent2env", "create", "", "pods", "portforward", false},
		{"agent2env", "update", "", "pods", "", false},
		{"agent2env", "list", "", "secrets", "", false},
		{"agent2env", "create", "apps", "deployments", "", false},
		{"agent2env", "create", "rbac.authorization.k8s.io", "roles", "", false},
		// Nothing outside its namespace.
		{"default", "create", "", "pods", "", false},
		{"default", "get", "", "secrets", "", false},
		{"", "list", "", "nodes", "", false},
		{"", "list", "", "pods", "", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:agent2env:agent2env",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:agent2env", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: tc.ns, Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.sub,
			},
		}}
		res, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Allowed != tc.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed %v, want %v", tc.verb, tc.group, tc.resource, tc.sub, tc.ns, res.Status.Allowed, tc.allowed)
		}
	}
}
