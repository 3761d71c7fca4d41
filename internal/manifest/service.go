// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"podmin.dev/podmin/internal/scrub"
)

// Service is the deliberately small subset of a v1 Service that Podmin
// implements: a namespaced name, an equality selector and integer ports.
type Service struct {
	Name      string
	Namespace string
	// Selector matches Pod labels by equality; it is never empty.
	Selector map[string]string
	// Ports are sorted by protocol, then port, so equal Services have
	// equal canonical bytes whatever order the manifest listed them in.
	Ports []Port
}

// Port is one Service port with its defaults applied.
type Port struct {
	// Name is optional: a DNS label, unique within the Service. It lets a
	// multi-port Kubernetes Service paste unchanged; Podmin's VIPs and DNS
	// do not use it.
	Name string
	// Protocol is corev1.ProtocolTCP or corev1.ProtocolUDP.
	Protocol corev1.Protocol
	// Port is the Service port, 1 through 65535.
	Port int32
	// TargetPort is the Pod port; it equals Port when the manifest omits it.
	TargetPort int32
}

// YAML returns the canonical v1 Service bytes that the deploy step
// content-addresses: defaults explicit, ports sorted, keys sorted.
func (s *Service) YAML() ([]byte, error) {
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
		Spec:       corev1.ServiceSpec{Selector: s.Selector},
	}
	for _, p := range s.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromInt32(p.TargetPort),
		})
	}
	return CanonicalYAML(&svc)
}

// DecodeService reads a Service payload, such as the canonical bytes that
// Service.YAML produced, with the same validation as Extract.
func DecodeService(data []byte) (*Service, error) {
	docs, err := splitStream(data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 || docs[0].kind != "Service" || docs[0].apiVersion != "v1" {
		return nil, &Error{Detail: "a Service payload must hold exactly one v1 Service"}
	}
	return decodeService(docs[0].object)
}

// allow is a tree of the fields Podmin supports; a nil subtree accepts the
// whole typed value below it.
type allow map[string]allow

func serviceAllow() allow {
	return allow{
		"apiVersion": nil,
		"kind":       nil,
		"metadata":   {"name": nil, "namespace": nil},
		"spec": {
			"selector": nil,
			"ports":    {"name": nil, "port": nil, "protocol": nil, "targetPort": nil},
		},
	}
}

const serviceSubset = "Podmin Services support only metadata.name, metadata.namespace, spec.selector and spec.ports with name, port, protocol and targetPort; remove it"

// decodeService validates a Service document against the supported subset
// and returns it with defaults applied. The namespace defaults to default;
// matching it with the DaemonSet is the caller's job.
func decodeService(obj map[string]any) (*Service, error) {
	var p problems
	if sel, ok := obj["spec"].(map[string]any); ok {
		if m, ok := sel["selector"].(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				switch m[k].(type) {
				case map[string]any, []any:
					p.add(subjectService, "spec.selector", "must be an equality-based map of label keys to values, not %s with %s; write key: value pairs", describe(m[k]), scrub.Quote(k))
					return nil, p.err()
				}
			}
		}
	}
	checkSubset(&p, subjectService, "", obj, reflect.TypeFor[corev1.Service](), serviceAllow())
	if !p.ok() {
		return nil, p.err()
	}
	var in corev1.Service
	if err := remarshal(obj, &in); err != nil {
		return nil, &Error{Subject: subjectService, Detail: err.Error()}
	}
	svc := &Service{Name: in.Name, Namespace: cmp.Or(in.Namespace, DefaultNamespace), Selector: in.Spec.Selector}
	if in.Name == "" {
		p.add(subjectService, "metadata.name", "is required: name the Service")
	} else if len(validation.IsDNS1035Label(in.Name)) > 0 {
		p.add(subjectService, "metadata.name", "%s is not a valid Service name: use 1 to 63 lowercase letters, digits or '-', starting with a letter and ending with a letter or digit", scrub.Quote(in.Name))
	}
	if problem := namespaceProblem(svc.Namespace); problem != "" {
		p.add(subjectService, "metadata.namespace", "%s", problem)
	}
	if len(svc.Selector) == 0 {
		p.add(subjectService, "spec.selector", "is required: select the DaemonSet's Pods by their template labels, e.g. app: web")
	}
	for _, k := range sortedKeys(svc.Selector) {
		if problem := labelProblem(k, svc.Selector[k]); problem != "" {
			p.add(subjectService, keyPath("spec.selector", k), "%s", problem)
		}
	}
	if len(in.Spec.Ports) == 0 {
		p.add(subjectService, "spec.ports", "at least one port is required")
	}
	seen := map[Port]bool{}
	names := map[string]bool{}
	for i, sp := range in.Spec.Ports {
		path := fmt.Sprintf("spec.ports[%d]", i)
		port := Port{Name: sp.Name, Protocol: cmp.Or(sp.Protocol, corev1.ProtocolTCP), Port: sp.Port, TargetPort: sp.Port}
		switch {
		case sp.Name == "":
		case len(validation.IsDNS1123Label(sp.Name)) > 0:
			p.add(subjectService, path+".name", "%s is not a valid port name: %s", scrub.Quote(sp.Name), labelHint)
		case names[sp.Name]:
			p.add(subjectService, path+".name", "%s names another port too: give each port a unique name", scrub.Quote(sp.Name))
		}
		names[sp.Name] = true
		if port.Protocol != corev1.ProtocolTCP && port.Protocol != corev1.ProtocolUDP {
			p.add(subjectService, path+".protocol", "%s is not supported: use TCP or UDP", scrub.Quote(string(sp.Protocol)))
		}
		if sp.Port < 1 || sp.Port > 65535 {
			p.add(subjectService, path+".port", "must be from 1 through 65535, not %d", sp.Port)
		}
		switch {
		case sp.TargetPort.Type == intstr.String:
			p.add(subjectService, path+".targetPort", "named target port %s is not supported: use the container's port number", scrub.Quote(sp.TargetPort.StrVal))
		case sp.TargetPort.IntVal != 0:
			port.TargetPort = sp.TargetPort.IntVal
			if port.TargetPort < 1 || port.TargetPort > 65535 {
				p.add(subjectService, path+".targetPort", "must be from 1 through 65535, not %d", port.TargetPort)
			}
		}
		key := Port{Protocol: port.Protocol, Port: port.Port}
		if seen[key] {
			p.add(subjectService, path, "duplicate %s port %d: each protocol and port pair must be unique", port.Protocol, port.Port)
		}
		seen[key] = true
		svc.Ports = append(svc.Ports, port)
	}
	if !p.ok() {
		return nil, p.err()
	}
	slices.SortFunc(svc.Ports, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	return svc, nil
}

// checkSubset reports fields outside the allowed tree, then type-checks
// the allowed ones. Known-but-unsupported fields are told apart from typos.
func checkSubset(p *problems, subject, path string, v any, t reflect.Type, a allow) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case a == nil || v == nil:
		checkTypes(p, subject, path, v, t)
	case t.Kind() == reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			checkTypes(p, subject, path, v, t)
			return
		}
		for i, e := range l {
			checkSubset(p, subject, fmt.Sprintf("%s[%d]", path, i), e, t.Elem(), a)
		}
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			checkTypes(p, subject, path, v, t)
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			child := fieldPath(path, k)
			ft, known := fields[k]
			sub, allowed := a[k]
			switch {
			case !known:
				p.add(subject, child, "unknown field: check its spelling, case and indentation")
			case !allowed:
				if !isEmpty(m[k]) {
					p.add(subject, child, "not supported: %s", serviceSubset)
				}
			default:
				checkSubset(p, subject, child, m[k], ft, sub)
			}
		}
	default:
		checkTypes(p, subject, path, v, t)
	}
}

// isEmpty reports whether v carries no content: null, or objects and
// lists of nothing but empty values ("status: {loadBalancer: {}}" and
// "creationTimestamp: null", which kubectl emits, are empty).
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range v {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	default:
		return false
	}
}

func remarshal(v any, out any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(j, out)
}

// labelProblem reports why key=value is not a valid Kubernetes label.
func labelProblem(key, value string) string {
	if len(validation.IsQualifiedName(key)) > 0 {
		return fmt.Sprintf("%s is not a valid label key: use an optional DNS subdomain prefix and '/', then 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", scrub.Quote(key))
	}
	if len(validation.IsValidLabelValue(value)) > 0 {
		return fmt.Sprintf("%s is not a valid label value: use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", scrub.Quote(value))
	}
	return ""
}
