// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"podmin.dev/podmin/internal/scrub"
)

// ExtractOptions carries the deploy command's expectations. Zero values
// check nothing, which is what "podmin validate" needs.
type ExtractOptions struct {
	// Name, when set, must equal the DaemonSet's metadata.name.
	Name string
	// NodeGroup, when set, must equal the template's NodeGroup selector.
	NodeGroup string
	// Images are image option values: one bare "<reference>" or any number
	// of "<container>=<reference>". References without a registry host are
	// cluster shorthand (see ResolveImage).
	Images []string
	// RequireService asserts that the stream holds a Service.
	RequireService bool
}

// Result is an extracted deployment.
type Result struct {
	// Name is the DaemonSet's and the Pod's name.
	Name string
	// Namespace is the DaemonSet's namespace with the default applied.
	Namespace string
	// NodeGroup is the value of the template's NodeGroup selector.
	NodeGroup string
	// Pod is the emitted Pod; PodYAML is its canonical encoding.
	Pod *corev1.Pod
	// Service is nil when the stream has none.
	Service *Service
	// PodYAML and ServiceYAML are the canonical payload bytes to be
	// content-addressed. ServiceYAML is nil when there is no Service.
	PodYAML, ServiceYAML []byte
	// Warnings are the privileged settings and host access the Pod has,
	// in the order of the manifest; the caller shows them to the user.
	Warnings []Warning
}

// Extract validates a deployment stream and derives its Pod and Service
// payloads. Errors wrap ErrInvalid and are *Error values joined with
// errors.Join, in a deterministic order.
func Extract(data []byte, opts ExtractOptions) (*Result, error) {
	var p problems
	images := parseImageValues(&p, opts.Images)
	docs, err := splitStream(data)
	if err != nil {
		return nil, err
	}
	dsDoc, svcDoc, err := classify(docs)
	if err != nil {
		return nil, err
	}
	var ds appsv1.DaemonSet
	checkTypes(&p, subjectDaemonSet, "", dsDoc.object, reflect.TypeFor[appsv1.DaemonSet]())
	if p.ok() {
		if err := remarshal(dsDoc.object, &ds); err != nil {
			p.add(subjectDaemonSet, "", "%v", err)
		}
	}
	var svc *Service
	if svcDoc != nil {
		svc, err = decodeService(svcDoc.object)
		if err != nil {
			p.errs = append(p.errs, err)
		}
	} else if opts.RequireService {
		p.add("", "", "the manifest has no v1 Service, but one is required: add a Service or deploy without the service option")
	}
	if !p.ok() {
		return nil, p.err()
	}

	r := &Result{Name: ds.Name, Namespace: cmp.Or(ds.Namespace, DefaultNamespace), Service: svc}
	r.NodeGroup = checkDaemonSet(&p, &ds, dsDoc.object, opts)
	r.Warnings = checkPodSpec(&p, &ds.Spec.Template.Spec, r.Name, r.Namespace)
	strategy := checkUpdateStrategy(&p, ds.Spec.UpdateStrategy, &ds.Spec.Template.Spec)
	tmpl := ds.Spec.Template
	if svc != nil {
		if svc.Namespace != r.Namespace {
			p.add(subjectService, "metadata.namespace", "%s does not match the DaemonSet's namespace %s; put both in the same namespace", scrub.Quote(svc.Namespace), scrub.Quote(r.Namespace))
		}
		for _, k := range sortedKeys(svc.Selector) {
			if v, ok := tmpl.Labels[k]; !ok || v != svc.Selector[k] {
				p.add(subjectService, "spec.selector", "does not select this DaemonSet's Pods: spec.template.metadata.labels lacks %s: %s; make the selector match the template labels", scrub.Quote(k), scrub.Quote(svc.Selector[k]))
				break
			}
		}
	}
	if !p.ok() {
		return nil, p.err()
	}

	spec := *tmpl.Spec.DeepCopy()
	spec.NodeSelector = nil
	applyImages(&p, &spec, images)
	if !p.ok() {
		return nil, p.err() // missing images would only repeat the option problem
	}
	checkContainerImages(&p, &spec)
	addIdentity(&p, &spec, r.Name)
	if !p.ok() {
		return nil, p.err()
	}
	annotations := maps.Clone(tmpl.Annotations)
	if svc != nil {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ServiceAnnotation] = svc.Name
	}
	for k, v := range strategy {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[k] = v
	}
	r.Pod = &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: r.Name, Namespace: r.Namespace,
			Labels: maps.Clone(tmpl.Labels), Annotations: annotations,
		},
		Spec: spec,
	}
	if r.PodYAML, err = CanonicalYAML(r.Pod); err != nil {
		return nil, fmt.Errorf("encode Pod: %w", err)
	}
	if svc != nil {
		if r.ServiceYAML, err = svc.YAML(); err != nil {
			return nil, fmt.Errorf("encode Service: %w", err)
		}
	}
	return r, nil
}

// classify finds the one DaemonSet and the optional Service.
func classify(docs []document) (ds, svc *document, err error) {
	var p problems
	for i := range docs {
		d := &docs[i]
		switch {
		case d.kind == "DaemonSet" && d.apiVersion != "apps/v1":
			p.add(d.subject, "apiVersion", "%s is not supported for a DaemonSet: use apps/v1", scrub.Quote(d.apiVersion))
		case d.kind == "Service" && d.apiVersion != "v1":
			p.add(d.subject, "apiVersion", "%s is not supported for a Service: use v1", scrub.Quote(d.apiVersion))
		case d.kind == "DaemonSet" && ds != nil:
			p.add(d.subject, "", "a second DaemonSet is not supported: a deployment stream holds exactly one; deploy each DaemonSet separately")
		case d.kind == "DaemonSet":
			ds = d
		case d.kind == "Service" && svc != nil:
			p.add(d.subject, "", "a second Service is not supported: a deployment stream holds at most one; deploy each Service with its own DaemonSet")
		case d.kind == "Service":
			svc = d
		default:
			p.add(d.subject, "kind", "%s is not supported: a deployment stream holds one apps/v1 DaemonSet and at most one v1 Service; remove it", scrub.Quote(d.kind))
		}
	}
	if p.ok() && ds == nil {
		p.add("", "", "the manifest has no apps/v1 DaemonSet: add one")
	}
	return ds, svc, p.err()
}

// schedulingHint explains every rejected scheduling field: the NodeGroup
// selector is the sole scheduling target.
const schedulingHint = "Podmin schedules only by the " + NodeGroupSelector + " node selector; remove it"

// checkDaemonSet applies the DaemonSet rules and returns the NodeGroup.
func checkDaemonSet(p *problems, ds *appsv1.DaemonSet, raw map[string]any, opts ExtractOptions) string {
	const base = "spec.template.spec"
	if problem := dnsLabel("DaemonSet name", ds.Name); problem != "" {
		p.add(subjectDaemonSet, "metadata.name", "%s", problem)
	} else if opts.Name != "" && ds.Name != opts.Name {
		p.add(subjectDaemonSet, "metadata.name", "%s does not match the deployment name %s; rename the DaemonSet or deploy it as %[1]s", scrub.Quote(ds.Name), scrub.Quote(opts.Name))
	}
	if problem := namespaceProblem(cmp.Or(ds.Namespace, DefaultNamespace)); problem != "" {
		p.add(subjectDaemonSet, "metadata.namespace", "%s", problem)
	}
	checkTemplateMetadata(p, raw)
	tmpl := &ds.Spec.Template
	for _, k := range sortedKeys(tmpl.Labels) {
		if problem := labelProblem(k, tmpl.Labels[k]); problem != "" {
			p.add(subjectDaemonSet, keyPath("spec.template.metadata.labels", k), "%s", problem)
		}
	}
	checkPodminAnnotations(p, "spec.template.metadata.annotations", tmpl.Annotations)

	spec := &tmpl.Spec
	nodeGroup, ok := spec.NodeSelector[NodeGroupSelector]
	field := keyPath(base+".nodeSelector", NodeGroupSelector)
	switch {
	case !ok:
		p.add(subjectDaemonSet, base+".nodeSelector", "%s is required: set it to the NodeGroup that runs this DaemonSet", NodeGroupSelector)
	case dnsLabel("NodeGroup name", nodeGroup) != "":
		p.add(subjectDaemonSet, field, "%s", dnsLabel("NodeGroup name", nodeGroup))
	case opts.NodeGroup != "" && nodeGroup != opts.NodeGroup:
		p.add(subjectDaemonSet, field, "%s does not match the requested NodeGroup %s; change the selector or deploy to %[1]s", scrub.Quote(nodeGroup), scrub.Quote(opts.NodeGroup))
	}
	for _, k := range sortedKeys(spec.NodeSelector) {
		if k != NodeGroupSelector {
			p.add(subjectDaemonSet, keyPath(base+".nodeSelector", k), "not supported: %s", schedulingHint)
		}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"nodeName", spec.NodeName != ""},
		{"affinity", spec.Affinity != nil},
		{"schedulerName", spec.SchedulerName != ""},
		{"topologySpreadConstraints", len(spec.TopologySpreadConstraints) > 0},
	} {
		if f.set {
			p.add(subjectDaemonSet, base+"."+f.name, "not supported: %s", schedulingHint)
		}
	}
	if len(spec.EphemeralContainers) > 0 {
		p.add(subjectDaemonSet, base+".ephemeralContainers", "not supported: ephemeral containers are added to running Pods through the Kubernetes API, which Podmin does not have; remove them")
	}
	if len(spec.Containers) == 0 {
		p.add(subjectDaemonSet, base+".containers", "at least one container is required")
	}
	var names []string
	check := func(field string, c *corev1.Container) {
		if problem := dnsLabel("container name", c.Name); problem != "" {
			p.add(subjectDaemonSet, field+".name", "%s", problem)
		} else if slices.Contains(names, c.Name) {
			p.add(subjectDaemonSet, field+".name", "%s is used by another container; give every container and init container a unique name", scrub.Quote(c.Name))
		}
		names = append(names, c.Name)
		switch c.ImagePullPolicy {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			p.add(subjectDaemonSet, field+".imagePullPolicy", "%s is not valid: use Always, IfNotPresent or Never", scrub.Quote(string(c.ImagePullPolicy)))
		}
	}
	for i := range spec.InitContainers {
		check(fmt.Sprintf("%s.initContainers[%d]", base, i), &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		check(fmt.Sprintf("%s.containers[%d]", base, i), &spec.Containers[i])
	}
	return nodeGroup
}

// checkTemplateMetadata rejects template metadata beyond name, namespace,
// labels and annotations: the rest is API-server state a Pod cannot carry.
func checkTemplateMetadata(p *problems, raw map[string]any) {
	spec, _ := raw["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	meta, _ := tmpl["metadata"].(map[string]any)
	for _, k := range sortedKeys(meta) {
		switch k {
		case "name", "namespace", "labels", "annotations":
		default:
			if !isEmpty(meta[k]) {
				p.add(subjectDaemonSet, fieldPath("spec.template.metadata", k), "not supported in a Pod template: Podmin sets the Pod's name and namespace and keeps only labels and annotations; remove it")
			}
		}
	}
}

// checkContainerImages runs after image options were applied: every
// container needs an image in the cluster registry, shorthand is resolved
// so the Pod carries the full reference, and an omitted pull policy means
// Always.
func checkContainerImages(p *problems, spec *corev1.PodSpec) {
	const base = "spec.template.spec"
	check := func(field string, c *corev1.Container) {
		if c.Image == "" {
			p.add(subjectDaemonSet, field+".image", "is required: set it in the manifest or pass the image option %s=<reference>", c.Name)
		} else if ref, err := ResolveImage(c.Image); err != nil {
			p.add(subjectDaemonSet, field+".image", "%v", err)
		} else {
			c.Image = ref
		}
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range spec.InitContainers {
		check(fmt.Sprintf("%s.initContainers[%d]", base, i), &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		check(fmt.Sprintf("%s.containers[%d]", base, i), &spec.Containers[i])
	}
}
