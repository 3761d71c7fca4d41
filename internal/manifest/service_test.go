// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const subset = "not supported: Podmin Services support only metadata.name, metadata.namespace, spec.selector and spec.ports with name, port, protocol and targetPort; remove it"

func TestExtractService(t *testing.T) {
	ports := func(ps ...any) mutation { return set("spec.ports", ps) }
	port := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	runExtractCases(t, []extractCase{
		{name: "minimal", in: withSvc()},
		{name: "namespace defaults on both", in: stream([]mutation{del("metadata.namespace")}, []mutation{del("metadata.namespace")}, true)},
		{name: "kubectl noise", in: withSvc(set("metadata.creationTimestamp", nil), set("status", map[string]any{"loadBalancer": map[string]any{}}))},
		{name: "tcp and udp on one port", in: withSvc(ports(port("port", 53), port("port", 53, "protocol", "UDP")))},
		{name: "namespace mismatch", in: withSvc(set("metadata.namespace", "other")), want: `Service metadata.namespace: "other" does not match the DaemonSet's namespace "product"; put both in the same namespace`},
		{name: "namespace defaulted mismatch", in: withSvc(del("metadata.namespace")), want: `Service metadata.namespace: "default" does not match the DaemonSet's namespace "product"; put both in the same namespace`},
		{name: "namespace reserved", in: withSvc(set("metadata.namespace", "_system")), want: `Service metadata.namespace: "_system" is reserved for Podmin system state; choose another namespace`},
		{name: "name missing", in: withSvc(del("metadata.name")), want: "Service metadata.name: is required: name the Service"},
		{name: "name invalid", in: withSvc(set("metadata.name", "1web")), want: `Service metadata.name: "1web" is not a valid Service name: use 1 to 63 lowercase letters, digits or '-', starting with a letter and ending with a letter or digit`},
		{name: "selector missing", in: withSvc(del("spec.selector")), want: "Service spec.selector: is required: select the DaemonSet's Pods by their template labels, e.g. app: web"},
		{name: "selector not equality", in: withSvc(set("spec.selector", map[string]any{"matchLabels": map[string]any{"app": "web"}})), want: `Service spec.selector: must be an equality-based map of label keys to values, not an object with "matchLabels"; write key: value pairs`},
		{name: "selector misses pods", in: withSvc(set("spec.selector", map[string]any{"app": "api"})), want: "Service spec.selector: does not select this DaemonSet's Pods: spec.template.metadata.labels lacks \"app\": \"api\"; make the selector match the template labels"},
		{name: "selector invalid label", in: withSvc(set("spec.selector", map[string]any{"app": "-web"})), want: `Service spec.selector["app"]: "-web" is not a valid label value: use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`},
		{name: "no ports", in: withSvc(del("spec.ports")), want: "Service spec.ports: at least one port is required"},
		{name: "port zero", in: withSvc(ports(port("port", 0))), want: "Service spec.ports[0].port: must be from 1 through 65535, not 0"},
		{name: "port too large", in: withSvc(ports(port("port", 65536))), want: "Service spec.ports[0].port: must be from 1 through 65535, not 65536"},
		{name: "port not integer", in: withSvc(ports(port("port", "http"))), want: `Service spec.ports[0].port: must be an integer of at most 32 bits, not "http"`},
		{name: "target out of range", in: withSvc(ports(port("port", 80, "targetPort", 70000))), want: "Service spec.ports[0].targetPort: must be from 1 through 65535, not 70000"},
		{name: "named target port", in: withSvc(ports(port("port", 80, "targetPort", "http"))), want: `Service spec.ports[0].targetPort: named target port "http" is not supported: use the container's port number`},
		{name: "sctp", in: withSvc(ports(port("port", 80, "protocol", "SCTP"))), want: `Service spec.ports[0].protocol: "SCTP" is not supported: use TCP or UDP`},
		{name: "duplicate pair", in: withSvc(ports(port("port", 80, "targetPort", 8080), port("port", 80, "protocol", "TCP"))), want: "Service spec.ports[1]: duplicate TCP port 80: each protocol and port pair must be unique"},
		{name: "type", in: withSvc(set("spec.type", "ClusterIP")), want: "Service spec.type: " + subset},
		{name: "clusterIP", in: withSvc(set("spec.clusterIP", "None")), want: "Service spec.clusterIP: " + subset},
		{name: "sessionAffinity", in: withSvc(set("spec.sessionAffinity", "ClientIP")), want: "Service spec.sessionAffinity: " + subset},
		{name: "externalName", in: withSvc(set("spec.externalName", "example.com")), want: "Service spec.externalName: " + subset},
		{name: "labels", in: withSvc(set("metadata.labels", map[string]any{"app": "web"})), want: "Service metadata.labels: " + subset},
		{name: "port name", in: withSvc(ports(port("name", "https", "port", 443)))},
		{name: "multi-port names", in: withSvc(ports(port("name", "https", "port", 443, "targetPort", 8443), port("name", "metrics", "port", 9090)))},
		{name: "port name invalid", in: withSvc(ports(port("name", "HTTPS", "port", 443))), want: `Service spec.ports[0].name: "HTTPS" is not a valid port name: ` + labelHint},
		{name: "port name too long", in: withSvc(ports(port("name", strings.Repeat("a", 64), "port", 443))), want: `Service spec.ports[0].name: "` + strings.Repeat("a", 64) + `" is not a valid port name: ` + labelHint},
		{name: "port name twice", in: withSvc(ports(port("name", "web", "port", 443), port("name", "web", "port", 80))), want: `Service spec.ports[1].name: "web" names another port too: give each port a unique name`},
		{name: "nodePort", in: withSvc(ports(port("port", 443, "nodePort", 30443))), want: "Service spec.ports[0].nodePort: " + subset},
		{name: "appProtocol", in: withSvc(ports(port("port", 443, "appProtocol", "https"))), want: "Service spec.ports[0].appProtocol: " + subset},
		{name: "status", in: withSvc(set("status", map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "1.2.3.4"}}}})), want: "Service status: " + subset},
		{name: "typo", in: withSvc(set("spec.selecter", map[string]any{})), want: "Service spec.selecter: unknown field: check its spelling, case and indentation"},
	})
}

func TestServiceDefaultsAndRoundTrip(t *testing.T) {
	in := withSvc(set("spec.ports", []any{
		map[string]any{"port": 8125, "protocol": "UDP"},
		map[string]any{"port": 443, "targetPort": 8443},
		map[string]any{"port": 80},
	}))
	r, err := Extract(in, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Service{Name: "frontend", Namespace: "product", Selector: map[string]string{"app": "web"}, Ports: []Port{
		{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: 80},
		{Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: 8443},
		{Protocol: corev1.ProtocolUDP, Port: 8125, TargetPort: 8125},
	}}
	if !reflect.DeepEqual(r.Service, want) {
		t.Fatalf("Service = %+v, want %+v", r.Service, want)
	}
	back, err := DecodeService(r.ServiceYAML)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("DecodeService(ServiceYAML) = %+v, want %+v", back, want)
	}
	if _, err := DecodeService(ds()); err == nil || err.Error() != "a Service payload must hold exactly one v1 Service" {
		t.Errorf("DecodeService(DaemonSet) error = %v", err)
	}
}

func TestServicePortNamesRoundTrip(t *testing.T) {
	port := func(name string, p, target int) map[string]any {
		return map[string]any{"name": name, "port": p, "targetPort": target}
	}
	r, err := Extract(withSvc(set("spec.ports", []any{port("metrics", 9090, 9090), port("https", 443, 8443)})), ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{
		{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: 8443},
		{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: 9090},
	}
	if !reflect.DeepEqual(r.Service.Ports, want) {
		t.Fatalf("Ports = %+v, want %+v", r.Service.Ports, want)
	}
	if !strings.Contains(string(r.ServiceYAML), "name: https\n") {
		t.Errorf("payload lacks the port name:\n%s", r.ServiceYAML)
	}
	back, err := DecodeService(r.ServiceYAML)
	if err != nil || !reflect.DeepEqual(back.Ports, want) {
		t.Errorf("DecodeService(payload).Ports = %+v, %v; want %+v", back, err, want)
	}
}
