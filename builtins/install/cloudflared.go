// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/builtins/deployments"
	"podmin.dev/podmin/builtins/openv"
	secretops "podmin.dev/podmin/builtins/secrets"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// Cloudflared returns the cloudflared image install cloudflared mirrors
// and runs: the one place its version is pinned. The digest is the
// upstream multi-platform image index (linux/amd64 and linux/arm64).
func Cloudflared() openv.PinnedImage {
	return openv.PinnedImage{
		Platform: platformImage("cloudflared"),
		Tag:      "2025.11.1",
		Digest:   "sha256:89ee50efb1e9cb2ae30281a8a404fed95eb8f02f0a972617526f8c5b417acae2",
	}
}

// The names install cloudflared owns.
const (
	CloudflaredNamespace = "platform-cloudflared"
	CloudflaredName      = "cloudflared"
	// CloudflaredTokenKey is the secret key of the tunnel token, at
	// /<cluster>/platform-cloudflared/cloudflared/tunnel-token.
	CloudflaredTokenKey = "tunnel-token"
	// cloudflaredUID is the distroless "nonroot" user the image runs as.
	cloudflaredUID = 65532
)

// InstallCloudflaredOptions are the inputs of install cloudflared.
type InstallCloudflaredOptions struct {
	NodeGroup string
	// Provider is the secrets provider holding the tunnel token; empty
	// means the context's default.
	Provider string
}

// InstallResult reports an install.
type InstallResult struct {
	Component string `json:"component"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	NodeGroup string `json:"nodegroup"`
	// Image is the digest-pinned cluster reference the Pod runs.
	Image  string       `json:"image"`
	Mirror MirrorResult `json:"mirror"`
	// Action is created, updated, unchanged or repaired (the deployment
	// index; repaired: the entry was in place but its payload was rewritten).
	Action string `json:"action"`
	Pod    string `json:"pod"`
	Bucket string `json:"bucket"`
}

// ErrTokenMissing reports an install whose tunnel token does not exist.
var ErrTokenMissing = errors.New("cloudflared tunnel token not found")

// InstallCloudflared verifies that the tunnel token exists (without
// reading it), mirrors the pinned cloudflared image when the mirror lacks
// its digest, and commits the hardened platform-cloudflared/cloudflared
// static Pod to NodeGroup through the deployment index. Nothing is
// written before the token check passes; a repeated install checks the
// Pod payload, writes nothing and reports unchanged, or rewrites a missing
// or damaged payload and reports repaired.
func InstallCloudflared(ctx context.Context, e *openv.Env, opts InstallCloudflaredOptions) (InstallResult, error) {
	pin := Cloudflared()
	if e.CloudflaredImage != nil {
		pin = *e.CloudflaredImage
	}
	return installCloudflared(ctx, e, opts, pin)
}

// installCloudflared installs pin; tests pin an image their own registry
// serves.
func installCloudflared(ctx context.Context, e *openv.Env, opts InstallCloudflaredOptions, pin openv.PinnedImage) (InstallResult, error) {
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return InstallResult{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
	}
	if err := secretops.CheckProviderName(opts.Provider); err != nil {
		return InstallResult{}, err
	}
	key, err := state.NewKey(opts.NodeGroup, CloudflaredName)
	if err != nil {
		return InstallResult{}, err
	}
	c, err := e.CurrentContext()
	if err != nil {
		return InstallResult{}, err
	}
	s, err := e.OpenSecrets(ctx, c, opts.Provider)
	if err != nil {
		return InstallResult{}, err
	}
	if err := tokenExists(ctx, s, c.Cluster); err != nil {
		return InstallResult{}, err
	}
	data, err := cloudflaredManifest(opts.NodeGroup, s.Provider(), pin)
	if err != nil {
		return InstallResult{}, err
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Name: CloudflaredName, NodeGroup: opts.NodeGroup})
	if err != nil {
		return InstallResult{}, fmt.Errorf("cloudflared manifest: %w", err)
	}
	// The origin is set on the extracted Pod, after validation, because a
	// user's manifest may not claim it.
	ex.Pod.Annotations[deployments.OriginAnnotation] = "cloudflared"
	if ex.PodYAML, err = manifest.CanonicalYAML(ex.Pod); err != nil {
		return InstallResult{}, err
	}
	_, store, err := e.OpenCluster(ctx)
	if err != nil {
		return InstallResult{}, err
	}
	res := InstallResult{
		Component: "cloudflared", Name: CloudflaredName, Namespace: CloudflaredNamespace, NodeGroup: opts.NodeGroup,
		Image: pin.Reference(), Bucket: c.Bucket,
	}
	if res.Pod, err = state.PodPayloadPath(opts.NodeGroup, ex.PodYAML); err != nil {
		return InstallResult{}, err
	}
	// A deployment of this name that the install did not create is
	// refused before anything is written.
	ix, _, err := state.ReadDesiredIndex(ctx, store)
	if err != nil {
		return InstallResult{}, err
	}
	cur, exists := ix.Lookup(key)
	if exists && cur != (state.Entry{Pod: res.Pod}) {
		if err := checkInstalled(ctx, store, key, cur); err != nil {
			return InstallResult{}, err
		}
	}
	if res.Mirror, err = mirrorPinned(ctx, e, store, pin); err != nil {
		return InstallResult{}, err
	}
	// An index that already holds exactly this Pod is not proof that its
	// payload is still there and intact: the commit checks it (one Head
	// with a warm cache), rewrites it when it is missing or damaged
	// (Repaired) and writes no index then.
	r, err := state.NewCommitter(store, e.ClusterCommitOptions(c)).Deploy(ctx, state.Deployment{Key: key, Namespace: ex.Namespace, Pod: ex.PodYAML})
	if err != nil {
		return InstallResult{}, e.Explain(c, err)
	}
	// Said once the outcome is known, as deploy says it: an unchanged
	// install commits nothing.
	if r.Outcome != state.Unchanged {
		e.Progressf("committed %s to bucket %s (%s)", key, c.Bucket, r.Outcome)
	}
	if r.LostReply {
		e.Progressf("the reply to the index write was lost, but the index already holds %s as installed: nothing more was written", key)
	}
	res.Action, res.Pod = string(r.Outcome), r.Entry.Pod
	return res, nil
}

// tokenExists lists the Pod's secrets (never reading a value) and fails
// with the command that creates the token when it is absent.
func tokenExists(ctx context.Context, s secrets.Store, cluster string) error {
	n, err := secrets.PodSecret(cluster, CloudflaredNamespace, CloudflaredName, CloudflaredTokenKey)
	if err != nil {
		return err
	}
	entries, err := s.List(ctx, cluster, secrets.Filter{Namespace: CloudflaredNamespace, Pod: CloudflaredName})
	if err != nil {
		return fmt.Errorf("look for %s in %s: %w", n, s.Provider(), err)
	}
	for _, en := range entries {
		if en.Key != CloudflaredTokenKey {
			continue
		}
		if !en.DeletionScheduled.IsZero() {
			return fmt.Errorf("%w: %s is scheduled for deletion in %s: nothing was changed; cancel it with \"podmin secret restore %s --for %s -n %s --provider %s\" and run the install again",
				ErrTokenMissing, n, s.Provider(), CloudflaredTokenKey, CloudflaredName, CloudflaredNamespace, s.Provider())
		}
		return nil
	}
	return fmt.Errorf("%w: %s does not exist in %s: nothing was changed; store the token with \"podmin secret create %s --for %s -n %s --provider %s\" and run the install again",
		ErrTokenMissing, n, s.Provider(), CloudflaredTokenKey, CloudflaredName, CloudflaredNamespace, s.Provider())
}

// CloudflaredManifest renders the hardened cloudflared DaemonSet for
// nodegroup, whose token is mounted from the secrets provider: a
// non-root, read-only container without privilege escalation or
// capabilities, with bounded resources, that reads the token from the
// secrets mount (never from an environment variable or argument).
func CloudflaredManifest(nodegroup, provider string) ([]byte, error) {
	return cloudflaredManifest(nodegroup, provider, Cloudflared())
}

func cloudflaredManifest(nodegroup, provider string, pin openv.PinnedImage) ([]byte, error) {
	if !manifestProvider(provider) {
		return nil, fmt.Errorf("secrets provider %s cannot mount into Pods: use one of %q", scrub.Quote(provider), manifest.SecretsProviders())
	}
	labels := map[string]string{"app.kubernetes.io/name": CloudflaredName}
	no, yes := false, true
	uid := int64(cloudflaredUID)
	tokenFile := "/var/run/podmin/" + provider + "/" + CloudflaredTokenKey
	ds := appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: CloudflaredName, Namespace: CloudflaredNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: labels,
					Annotations: map[string]string{
						"podmin.dev/" + provider: CloudflaredTokenKey,
					},
				},
				Spec: corev1.PodSpec{
					NodeSelector:                 map[string]string{manifest.NodeGroupSelector: nodegroup},
					AutomountServiceAccountToken: &no,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            CloudflaredName,
						Image:           pin.Reference(),
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            cloudflaredArgs(tokenFile),
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
							Privileged: &no, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
					}},
				},
			},
		},
	}
	return yaml.Marshal(ds)
}

// cloudflaredArgs run the tunnel from the token file. Nodes have no IPv4
// address, so the connector reaches Cloudflare's edge over IPv6; metrics
// stay on the Pod's loopback; the image never updates itself.
func cloudflaredArgs(tokenFile string) []string {
	return []string{"tunnel", "--no-autoupdate", "--edge-ip-version", "6", "--metrics", "127.0.0.1:20241", "run", "--token-file", tokenFile}
}

func manifestProvider(p string) bool {
	for _, q := range manifest.SecretsProviders() {
		if q == p {
			return true
		}
	}
	return false
}

// UninstallCloudflaredOptions are the inputs of uninstall cloudflared.
type UninstallCloudflaredOptions struct {
	NodeGroup string
}

// UninstallCloudflared removes the cloudflared deployment of NodeGroup
// from the desired state. It refuses an entry that install cloudflared did
// not create, so a user's own "cloudflared" deployment is never removed by
// it. The mirrored image and the token stay: other NodeGroups may use the
// image, and the token belongs to its operator.
func UninstallCloudflared(ctx context.Context, e *openv.Env, opts UninstallCloudflaredOptions) (deployments.DeleteResult, error) {
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return deployments.DeleteResult{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
	}
	key, err := state.NewKey(opts.NodeGroup, CloudflaredName)
	if err != nil {
		return deployments.DeleteResult{}, err
	}
	_, store, err := e.OpenCluster(ctx)
	if err != nil {
		return deployments.DeleteResult{}, err
	}
	ix, _, err := state.ReadDesiredIndex(ctx, store)
	if err != nil {
		return deployments.DeleteResult{}, err
	}
	cur, ok := ix.Lookup(key)
	if !ok {
		return deployments.DeleteResult{Name: CloudflaredName, NodeGroup: opts.NodeGroup, Action: "absent"}, nil
	}
	if err := checkInstalled(ctx, store, key, cur); err != nil {
		return deployments.DeleteResult{}, err
	}
	return deployments.Delete(ctx, e, deployments.DeleteOptions{Name: CloudflaredName, NodeGroup: opts.NodeGroup})
}

// checkInstalled fails unless the entry's Pod carries the cloudflared
// install origin: install and uninstall never take over or remove a
// deployment someone else created under the same name.
func checkInstalled(ctx context.Context, store objstore.Store, key state.Key, entry state.Entry) error {
	data, err := state.FetchPayload(ctx, store, entry.Pod)
	if err != nil {
		return fmt.Errorf("%s: %w: nothing was changed", key, err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return fmt.Errorf("%s: decode Pod payload %s: %w: nothing was changed", key, entry.Pod, err)
	}
	if pod.Annotations[deployments.OriginAnnotation] != "cloudflared" {
		return fmt.Errorf("%w: deployment %s was not created by \"podmin install cloudflared\": nothing was changed; remove it with \"podmin delete %s -g %s\" first if it should go",
			ErrNotInstalled, key, key.Name, key.NodeGroup)
	}
	return nil
}

// ErrNotInstalled reports a deployment named like a managed component that
// its install command did not create.
var ErrNotInstalled = errors.New("not a Podmin-installed component")
