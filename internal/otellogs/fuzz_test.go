// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package otellogs

import (
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

// FuzzParse checks that every accepted --otel-logs value round-trips
// through String and renders a configuration that parses as YAML with the
// endpoint's exact host and path.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"endpoint=https://otlp.example.com/v1/logs",
		"endpoint=https://[2001:db8::1]:4317,protocol=grpc,mtls=true",
		"endpoint=https://h/v1/logs?a=b,ca=s3://bucket/key.pem,headers-secret=true",
		"endpoint=https://h:0/x", "endpoint=https://h/%zz", "endpoint=https://h/a b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(o.String())
		if err != nil || again.String() != o.String() {
			t.Fatalf("%q → %q does not round-trip: %v", s, o.String(), err)
		}
		var headers map[string]string
		if o.HeadersSecret {
			headers = map[string]string{"Authorization": "Bearer x"}
		}
		data, err := Render(o, Node{Cluster: "c", NodeGroup: "ng", Hostname: "h"}, headers, DefaultPaths())
		if err != nil {
			t.Fatalf("%q parsed but does not render: %v", s, err)
		}
		var c fluentConfig
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatalf("%q renders invalid YAML: %v", s, err)
		}
		out := c.Pipeline.Outputs[0]
		if out["host"] != o.Host() {
			t.Fatalf("host %v, want %q", out["host"], o.Host())
		}
		if o.Protocol == HTTP && out["logs_uri"] != o.Endpoint.RequestURI() {
			t.Fatalf("logs_uri %v, want %q", out["logs_uri"], o.Endpoint.RequestURI())
		}
	})
}

// FuzzParseHeaders checks that errors never repeat a header value.
func FuzzParseHeaders(f *testing.F) {
	f.Add(`{"Authorization":"Bearer VALUE-123456"}`)
	f.Add(`{"Bad Name":"VALUE-123456"}`)
	f.Add(`{"X":" VALUE-123456"}`)
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHeaders([]byte(s))
		if err == nil {
			if CheckHeaders(h) != nil {
				t.Fatal("accepted headers fail CheckHeaders")
			}
			return
		}
		if strings.Contains(s, "VALUE-123456") && strings.Contains(err.Error(), "VALUE-123456") {
			t.Fatalf("error repeats a value: %v", err)
		}
	})
}
