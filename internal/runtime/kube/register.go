package kube

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agent2env/agent2env/internal/buildinfo"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Settings of the kubernetes runtime, as "kubernetes.<key>" in
// runtime.Options (serve's --kubeconfig, --kube-* flags).
const (
	SettingKubeconfig   = "kubeconfig"    // a kubeconfig file; in-cluster config when empty
	SettingNamespace    = "namespace"     // default: the service account's, else "default"
	SettingConnect      = "connect"       // direct | port-forward
	SettingAgentImage   = "agent-image"   // the agent2env image; default: the daemon's own (ownImage)
	SettingRuntimeClass = "runtime-class" // the Pods' runtimeClassName
	SettingPullSecrets  = "pull-secrets"  // comma-separated imagePullSecrets
	SettingOwner        = "owner"         // the owner label's value
	SettingDaemonLabels = "daemon-labels" // selector of the daemon's Pods, k=v,k=v
	SettingStartTimeout = "start-timeout" // a duration
)

// namespaceFile is the in-cluster service account's namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func init() {
	runtime.Register(Name, func(ctx context.Context, opts runtime.Options) (sandbox.Runtime, error) {
		s, err := opts.OwnSettings(Name, SettingKubeconfig, SettingNamespace, SettingConnect, SettingAgentImage,
			SettingRuntimeClass, SettingPullSecrets, SettingOwner, SettingDaemonLabels, SettingStartTimeout)
		if err != nil {
			return nil, err
		}
		cfg, err := ConfigFromSettings(s)
		if err != nil {
			return nil, err
		}
		cfg.Logger = opts.Logger
		cfg.Services, cfg.Egress = opts.Services, opts.Egress
		cfg.CheckNetworkPolicies = true
		if cfg.AgentImage == "" {
			if cfg.AgentImage, err = ownImage(ctx, cfg); err != nil {
				return nil, err
			}
		}
		return New(ctx, cfg)
	})
}

// EnvPodName names the daemon's own Pod (the downward API's
// metadata.name), whose image is then the agent's.
const EnvPodName = "POD_NAME"

// ownImage is the agent image when none is set: the image of the daemon's
// own Pod when it runs in one ($POD_NAME in the namespace), which is the
// agent2env image, from wherever the cluster pulled it; else the one make
// image tags with this build's version.
func ownImage(ctx context.Context, cfg Config) (string, error) {
	name := os.Getenv(EnvPodName)
	if name == "" {
		v := buildinfo.Get().Version
		if v == "unknown" || v == "(devel)" {
			v = "latest"
		}
		return "agent2env/agent2env:" + v, nil
	}
	client, err := kubernetes.NewForConfig(cfg.Rest)
	if err != nil {
		return "", errdefs.Invalid("kubernetes runtime: %v", err)
	}
	pod, err := client.CoreV1().Pods(cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("kubernetes runtime: read the daemon's own pod %s ($%s) for the agent image: %w", name, EnvPodName, classify(err))
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "agent2env" {
			return c.Image, nil
		}
	}
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Image, nil
	}
	return "", errdefs.Invalid("kubernetes runtime: the daemon's pod %s has no container named agent2env: set the agent image", name)
}

// ConfigFromSettings makes a Config from the runtime's settings (without
// their "kubernetes." prefix).
func ConfigFromSettings(s map[string]string) (Config, error) {
	cfg := Config{
		Namespace: s[SettingNamespace], Connect: s[SettingConnect], AgentImage: s[SettingAgentImage],
		RuntimeClass: s[SettingRuntimeClass], Owner: s[SettingOwner],
	}
	var err error
	if path := s[SettingKubeconfig]; path != "" {
		cfg.Rest, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg.Rest, err = rest.InClusterConfig()
	}
	if err != nil {
		return cfg, errdefs.Invalid("kubernetes runtime: API server configuration (set --kubeconfig outside a cluster): %v", err)
	}
	// Hundreds of sandboxes start at once: client-go's 5 requests per
	// second would queue them.
	cfg.Rest.QPS, cfg.Rest.Burst = 100, 200
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
		if b, err := os.ReadFile(namespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
			cfg.Namespace = strings.TrimSpace(string(b))
		}
	}
	if v := s[SettingPullSecrets]; v != "" {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.PullSecrets = append(cfg.PullSecrets, name)
			}
		}
	}
	if v := s[SettingDaemonLabels]; v != "" {
		set, err := labels.ConvertSelectorToLabelsMap(v)
		if err != nil {
			return cfg, errdefs.Invalid("kubernetes runtime: daemon labels %q: %v", v, err)
		}
		cfg.DaemonLabels = set
	}
	if v := s[SettingStartTimeout]; v != "" {
		if cfg.StartTimeout, err = time.ParseDuration(v); err != nil || cfg.StartTimeout <= 0 {
			return cfg, errdefs.Invalid("kubernetes runtime: start timeout %q is not a positive duration", v)
		}
	}
	return cfg, nil
}
