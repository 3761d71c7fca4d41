// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"podmin.dev/podmin/internal/scrub"
)

// BuildOptions describe the built-in minimal DaemonSet. Field names follow
// the CLI flags of "podmin init" and "podmin deploy".
type BuildOptions struct {
	// Name names the DaemonSet, its single bare-image container and the
	// built-in Service.
	Name string
	// NodeGroup is written as the podmin.dev/nodegroup node selector.
	NodeGroup string
	// Namespace defaults to DefaultNamespace.
	Namespace string
	// Images are one bare "<reference>", making one container named after
	// the DaemonSet, or "<container>=<reference>" values, one container
	// each in the given order. References are resolved with ResolveImage.
	Images []string
	// Service adds a TCP Service named after the DaemonSet on port 443
	// targeting 8443, with an HTTPS GET /healthz readiness probe on 8443.
	Service bool
	// Ports are "SERVICE:TARGET[,SERVICE:TARGET...]" values. They imply a
	// Service, replace the default port, and the first target port gets a
	// TCP readiness probe instead of the HTTPS one.
	Ports []string
	// CPU is a positive Kubernetes quantity set as a limit on every container.
	CPU string
	// Memory is a positive Kubernetes quantity set as a limit on every container.
	Memory string
	// Env are "KEY=VALUE" or bare "KEY" values set on every container; a
	// bare key takes its value from LookupEnv.
	Env []string
	// LookupEnv resolves bare Env keys, normally os.LookupEnv.
	LookupEnv func(key string) (string, bool)
	// Secrets are keys listed in the podmin.dev/<SecretsProvider> Pod
	// template annotation.
	Secrets []string
	// SecretsProvider is one of SecretsProviders(); required with Secrets.
	SecretsProvider string
}

const (
	// appLabel selects the built-in DaemonSet's Pods.
	appLabel          = "app.kubernetes.io/name"
	defaultPort       = 443
	defaultTargetPort = 8443
	// readinessPeriod is the built-in readiness probe's period in
	// seconds. Kubelet's default of 10 s is how long a Pod whose first
	// probe came before its server listened stays out of its Service
	// (and a rollout waits for it); 2 s keeps that short and still
	// probes each Pod only every 2 s.
	readinessPeriod = 2
)

// Build renders the built-in DaemonSet (and its Service) as a canonical
// YAML stream that Extract accepts: the same options give the same bytes.
func Build(opts BuildOptions) ([]byte, error) {
	out, _, err := BuildExtracted(opts)
	return out, err
}

// BuildExtracted is Build that also returns what Extract makes of the
// stream with the DaemonSet's name and NodeGroup and no image overrides:
// Build checks its output with that extraction, so a caller that would
// extract the same stream next (deploy, init) takes it from here.
func BuildExtracted(opts BuildOptions) ([]byte, *Result, error) {
	out, err := build(opts)
	if err != nil {
		return nil, nil, err
	}
	// The options were validated by build, so a failure here is a bug in
	// Build, reported as such rather than as ErrInvalid.
	res, err := Extract(out, ExtractOptions{Name: opts.Name, NodeGroup: opts.NodeGroup})
	if err != nil {
		return nil, nil, fmt.Errorf("built-in manifest failed its own validation: %s", err.Error())
	}
	return out, res, nil
}

func build(opts BuildOptions) ([]byte, error) {
	var p problems
	ns := cmp.Or(opts.Namespace, DefaultNamespace)
	if problem := dnsLabel("DaemonSet name", opts.Name); problem != "" {
		p.add("name", "", "%s", problem)
	}
	if problem := dnsLabel("NodeGroup name", opts.NodeGroup); problem != "" {
		p.add("nodegroup", "", "%s", problem)
	}
	if problem := namespaceProblem(ns); problem != "" {
		p.add("namespace", "", "%s", problem)
	}
	images := parseImageValues(&p, opts.Images)
	if len(opts.Images) == 0 {
		p.add("image", "", "at least one image is required: pass <reference> or <container>=<reference>")
	}
	ports := parsePorts(&p, opts.Ports)
	wantService := opts.Service || len(opts.Ports) > 0
	if problem := dnsLabel("DaemonSet name", opts.Name); wantService && problem == "" && len(validation.IsDNS1035Label(opts.Name)) > 0 {
		p.add("name", "", "%s cannot name the built-in Service: Service names start with a letter; rename the DaemonSet", scrub.Quote(opts.Name))
	}
	if wantService && len(opts.Images) > 1 {
		p.add("service", "", "the built-in Service needs exactly one image, not %d; write the Service into a manifest file instead", len(opts.Images))
	}
	limits := corev1.ResourceList{}
	quantity(&p, "cpu", opts.CPU, "500m or 2", corev1.ResourceCPU, limits)
	quantity(&p, "memory", opts.Memory, "256Mi or 1Gi", corev1.ResourceMemory, limits)
	env := buildEnv(&p, opts.Env, opts.LookupEnv)
	annotations := buildSecrets(&p, opts.Secrets, opts.SecretsProvider)
	if !p.ok() {
		return nil, p.err()
	}

	labels := map[string]string{appLabel: opts.Name}
	var containers []corev1.Container
	for _, img := range images {
		c := corev1.Container{Name: cmp.Or(img.container, opts.Name), Image: img.ref, Env: env}
		if len(limits) > 0 {
			c.Resources.Limits = limits.DeepCopy()
		}
		containers = append(containers, c)
	}
	if wantService {
		if len(ports) == 0 {
			ports = []Port{{Protocol: corev1.ProtocolTCP, Port: defaultPort, TargetPort: defaultTargetPort}}
			containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromInt32(defaultTargetPort), Scheme: corev1.URISchemeHTTPS,
			}}, PeriodSeconds: readinessPeriod}
		} else {
			containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
				Port: intstr.FromInt32(ports[0].TargetPort),
			}}, PeriodSeconds: readinessPeriod}
		}
		var targets []int32
		for _, port := range ports {
			if !slices.Contains(targets, port.TargetPort) {
				targets = append(targets, port.TargetPort)
				containers[0].Ports = append(containers[0].Ports, corev1.ContainerPort{ContainerPort: port.TargetPort, Protocol: corev1.ProtocolTCP})
			}
		}
	}
	ds := appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{NodeGroupSelector: opts.NodeGroup},
					Containers:   containers,
				},
			},
		},
	}
	out, err := CanonicalYAML(&ds)
	if err != nil {
		return nil, fmt.Errorf("encode DaemonSet: %w", err)
	}
	if wantService {
		svc := &Service{Name: opts.Name, Namespace: ns, Selector: labels, Ports: ports}
		y, err := svc.YAML()
		if err != nil {
			return nil, fmt.Errorf("encode Service: %w", err)
		}
		out = slices.Concat(out, []byte("---\n"), y)
	}
	return out, nil
}

// parsePorts reads "SERVICE:TARGET" TCP pairs, comma-separated and
// repeatable, in order.
func parsePorts(p *problems, values []string) []Port {
	var out []Port
	for _, v := range values {
		subject := "port " + scrub.Quote(v)
		for item := range strings.SplitSeq(v, ",") {
			svc, target, ok := strings.Cut(item, ":")
			if !ok {
				p.add(subject, "", "%s must be SERVICE:TARGET, e.g. 443:8443", scrub.QuotePart(v, item))
				continue
			}
			sp, err1 := portNumber(svc)
			tp, err2 := portNumber(target)
			if err := cmp.Or(err1, err2); err != nil {
				p.add(subject, "", "%v", err)
				continue
			}
			if slices.ContainsFunc(out, func(o Port) bool { return o.Port == sp }) {
				p.add(subject, "", "service port %d is given twice; give each service port once", sp)
				continue
			}
			out = append(out, Port{Protocol: corev1.ProtocolTCP, Port: sp, TargetPort: tp})
		}
	}
	return out
}

func portNumber(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s is not a port number: use 1 to 65535", scrub.Quote(s))
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d is out of range: use 1 to 65535", n)
	}
	return int32(n), nil
}

func quantity(p *problems, name, value, example string, res corev1.ResourceName, limits corev1.ResourceList) {
	if value == "" {
		return
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		p.add(name+" "+scrub.Quote(value), "", "must be a positive Kubernetes quantity such as %s", example)
		return
	}
	limits[res] = q
}

func buildEnv(p *problems, values []string, lookup func(string) (string, bool)) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, v := range values {
		subject := "env " + scrub.Quote(v)
		key, value, ok := strings.Cut(v, "=")
		switch {
		case len(validation.IsEnvVarName(key)) > 0:
			p.add(subject, "", "%s is not a valid variable name: use letters, digits, '_', '-' or '.', not starting with a digit", scrub.QuotePart(v, key))
			continue
		case slices.ContainsFunc(out, func(e corev1.EnvVar) bool { return e.Name == key }):
			p.add(subject, "", "%s is set twice; set each variable once", scrub.QuotePart(v, key))
			continue
		case !ok:
			if lookup != nil {
				value, ok = lookup(key)
			}
			if !ok {
				p.add(subject, "", "%s is not set in the environment; pass it as KEY=VALUE", scrub.QuotePart(v, key))
				continue
			}
		}
		out = append(out, corev1.EnvVar{Name: key, Value: value})
	}
	return out
}

func buildSecrets(p *problems, keys []string, provider string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	if !slices.Contains(SecretsProviders(), provider) {
		p.add("secrets provider "+scrub.Quote(provider), "", "is not supported: use %s", strings.Join(SecretsProviders(), " or "))
		return nil
	}
	for i, k := range keys {
		if err := checkSecretKey(k); err != nil {
			p.add("secret "+scrub.Quote(k), "", "%v", err)
		} else if slices.Contains(keys[:i], k) {
			p.add("secret "+scrub.Quote(k), "", "is listed twice; list each key once")
		}
	}
	return map[string]string{podminPrefix + provider: strings.Join(keys, ",")}
}
