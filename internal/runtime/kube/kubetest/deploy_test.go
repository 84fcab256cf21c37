package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestDeployManifests applies deploy/kubernetes to a real API server, as a
// server-side dry run and then for real, and checks that the daemon's
// service account may do what the kubernetes runtime needs in its
// namespace, and nothing else. Then it applies the HA variant over it
// (deploy/kubernetes/ha), as an operator moving to several daemons would
// (checkHA).
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
	if _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(dir, "base", "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	d := applyDeploy(ctx, t, c, dir)
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
	// The daemon's readiness asks the API server's /readyz (kube.Runtime.Ping).
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:agent2env:agent2env",
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:agent2env", "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/readyz", Verb: "get"},
	}}
	if res, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err != nil || !res.Status.Allowed {
		t.Errorf("the daemon may not read the API server's /readyz: %+v, %v", res, err)
	}
	checkHA(ctx, t, c, filepath.Join(dir, "ha"))
}

// checkHA applies the HA variant at dir (a dry run, then for real) and
// checks what the API server stored: three replicas rolled one at a time,
// spread by anti-affinity, a PodDisruptionBudget over them, the store's
// URL from a Secret, readiness on /readyz, scratch data directories.
func checkHA(ctx context.Context, t *testing.T, c *Cluster, dir string) {
	t.Helper()
	out, err := c.Kubectl(ctx, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "kind: PersistentVolumeClaim") {
		t.Error("the HA variant has a PersistentVolumeClaim: its daemons keep their records in PostgreSQL")
	}
	d := applyDeploy(ctx, t, c, dir)
	pod := d.Spec.Template.Spec
	main := pod.Containers[0]
	var storeFrom string
	for _, e := range main.Env {
		if e.Name == "AGENT2ENV_STORE" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			storeFrom = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	var spreadBy string
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 1 {
		term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		spreadBy = term.TopologyKey + " " + metav1.FormatLabelSelector(term.LabelSelector)
	}
	got := map[string]any{
		"replicas":       *d.Spec.Replicas,
		"strategy":       string(d.Spec.Strategy.Type),
		"maxUnavailable": d.Spec.Strategy.RollingUpdate.MaxUnavailable.String(),
		"maxSurge":       d.Spec.Strategy.RollingUpdate.MaxSurge.String(),
		"spreadBy":       spreadBy,
		"storeFrom":      storeFrom,
		"readiness":      main.ReadinessProbe.HTTPGet.Path,
		"readyTimeout":   main.ReadinessProbe.TimeoutSeconds,
		"data":           pod.Volumes[0].Name + " emptyDir " + fmt.Sprint(pod.Volumes[0].EmptyDir != nil && pod.Volumes[0].PersistentVolumeClaim == nil),
		"runtime":        main.Args[2],
	}
	want := map[string]any{
		"replicas": int32(3), "strategy": "RollingUpdate", "maxUnavailable": "1", "maxSurge": "0",
		"spreadBy":  "kubernetes.io/hostname app.kubernetes.io/component=daemon,app.kubernetes.io/name=agent2env",
		"storeFrom": "agent2env-store/url", "readiness": "/readyz", "readyTimeout": int32(3),
		"data": "data emptyDir true", "runtime": "--runtime=kubernetes",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the HA Deployment (-want +got):\n%s", diff)
	}
	pdb, err := c.Client.PolicyV1().PodDisruptionBudgets("agent2env").Get(ctx, "agent2env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget %+v: want at most one of the daemon's Pods unavailable", pdb.Spec)
	}
}

// applyDeploy applies the kustomization at dir, as a server-side dry run
// and then for real, and returns the daemon's Deployment as stored.
func applyDeploy(ctx context.Context, t *testing.T, c *Cluster, dir string) *appsv1.Deployment {
	t.Helper()
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
	return d
}
