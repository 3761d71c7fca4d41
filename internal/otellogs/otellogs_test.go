// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package otellogs

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "endpoint=https://otlp.example.com/v1/logs", want: "endpoint=https://otlp.example.com/v1/logs"},
		{in: "endpoint=https://otlp.example.com:4318/custom/logs?x=1,protocol=http,mtls=true,ca=s3://ca-bucket/otel/ca.pem,headers-secret=true",
			want: "endpoint=https://otlp.example.com:4318/custom/logs?x=1,mtls=true,ca=s3://ca-bucket/otel/ca.pem,headers-secret=true"},
		{in: "protocol=grpc,endpoint=https://[2001:db8::1]:4317", want: "endpoint=https://[2001:db8::1]:4317,protocol=grpc"},
		{in: "endpoint=https://otlp.example.com/v1/logs,mtls=false", want: "endpoint=https://otlp.example.com/v1/logs"},
		{in: "", err: "--otel-logs needs endpoint=URL"},
		{in: "protocol=grpc", err: "--otel-logs needs endpoint=URL"},
		{in: "endpoint=http://otlp.example.com/v1/logs", err: "must be https: TLS certificate and hostname verification are mandatory"},
		{in: "endpoint=https://user:pw@otlp.example.com/v1/logs", err: "must not hold credentials"},
		{in: "endpoint=https://otlp.example.com", err: "names no path: OTLP/HTTP uses the exact signal URL"},
		{in: "endpoint=https://otlp.example.com/v1/logs,protocol=grpc", err: "an OTLP/gRPC endpoint is https://HOST[:PORT]"},
		{in: "endpoint=https://otlp.example.com/v1/logs,protocol=json", err: "protocol=json: use http"},
		{in: "endpoint=https://otlp.example.com/v1/logs,mtls=yes", err: "mtls=yes: use mtls=true or mtls=false"},
		{in: "endpoint=https://otlp.example.com/v1/logs,ca=https://x/ca.pem", err: "use the exact object, ca=s3://BUCKET/KEY"},
		{in: "endpoint=https://otlp.example.com/v1/logs,ca=s3://bucket", err: "use the exact object"},
		{in: "endpoint=https://otlp.example.com/v1/logs,ca=s3://bucket/dir/", err: "use the exact object"},
		{in: "endpoint=https://otlp.example.com/v1/logs,tls=off", err: `unknown key "tls"`},
		{in: "endpoint=https://a/v1/logs,endpoint=https://b/v1/logs", err: "endpoint is given twice"},
		{in: "endpoint=https://otlp.example.com:99999/v1/logs", err: "invalid port"},
		{in: "endpoint=https://otlp.example.com/v1/logs#frag", err: "must not have a #fragment"},
		{in: "endpoint", err: "is not KEY=VALUE"},
	} {
		o, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, want error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || o.String() != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, o, err, tc.want)
		}
	}
}

func TestEndpointParts(t *testing.T) {
	o, _ := Parse("endpoint=https://otlp.example.com/ingest/v1/logs?tenant=a")
	if o.Host() != "otlp.example.com" || o.Port() != 443 || o.URI() != "/ingest/v1/logs?tenant=a" {
		t.Fatalf("%s %d %s", o.Host(), o.Port(), o.URI())
	}
	o, _ = Parse("endpoint=https://[2001:db8::1]:4317,protocol=grpc")
	if o.Host() != "2001:db8::1" || o.Port() != 4317 || o.URI() != "/opentelemetry.proto.collector.logs.v1.LogsService/Export" {
		t.Fatalf("%s %d %s", o.Host(), o.Port(), o.URI())
	}
}

var node = Node{Cluster: "prod", NodeGroup: "workers", Hostname: "ip-10-0-0-1"}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name, opts string
		headers    map[string]string
	}{
		{"http-default", "endpoint=https://otlp.example.com/v1/logs", nil},
		{"http-mtls-ca-headers", "endpoint=https://otlp.example.com:4318/v1/logs,mtls=true,ca=s3://ca-bucket/otel/ca.pem,headers-secret=true",
			map[string]string{"X-Tenant": "team-a", "Authorization": "Bearer golden-token"}},
		{"grpc", "endpoint=https://otlp.example.com:4317,protocol=grpc", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Render(o, node, tc.headers, DefaultPaths())
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s differs (go test -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// fluentConfig is the part of Fluent Bit's YAML schema the tests read.
type fluentConfig struct {
	Service  map[string]any      `yaml:"service"`
	Parsers  []map[string]string `yaml:"parsers"`
	Pipeline struct {
		Inputs  []map[string]any `yaml:"inputs"`
		Filters []map[string]any `yaml:"filters"`
		Outputs []map[string]any `yaml:"outputs"`
	} `yaml:"pipeline"`
}

// TestRenderedConfigurationParses reads the configuration back as Fluent
// Bit's YAML schema (the fluent-bit package is not installable here, so
// no real Fluent Bit runs it) and checks every property the feature
// depends on.
func TestRenderedConfigurationParses(t *testing.T) {
	o, _ := Parse("endpoint=https://otlp.example.com/v1/logs,mtls=true,ca=s3://ca-bucket/ca.pem,headers-secret=true")
	data, err := Render(o, node, map[string]string{"Authorization": "Bearer s3cr3t"}, DefaultPaths())
	if err != nil {
		t.Fatal(err)
	}
	var c fluentConfig
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatal(err)
	}
	in := c.Pipeline.Inputs[0]
	if in["name"] != "tail" || in["path"] != "/var/log/containers/*.log" || in["multiline.parser"] != "cri" ||
		in["db"] != "/var/lib/podmin/fluent-bit/tail.db" || in["path_key"] != "log.file.path" || in["storage.type"] != "filesystem" {
		t.Fatalf("input %v", in)
	}
	if c.Service["storage.path"] != "/var/lib/podmin/fluent-bit/storage" {
		t.Fatalf("service %v", c.Service)
	}
	out := c.Pipeline.Outputs[0]
	for k, v := range map[string]any{
		"name": "opentelemetry", "host": "otlp.example.com", "port": 443, "logs_uri": "/v1/logs", "grpc": "off",
		"tls": "on", "tls.verify": "on", "tls.verify_hostname": "on", "tls.ca_file": "/run/podmin/telemetry/ca.pem",
		"tls.crt_file": "/run/podmin/telemetry/current/tls.crt", "tls.key_file": "/run/podmin/telemetry/current/tls.key",
		"storage.total_limit_size": "1G", "logs_body_key": "$log",
	} {
		if out[k] != v {
			t.Errorf("output %s = %v, want %v", k, out[k], v)
		}
	}
	if h, _ := out["header"].([]any); len(h) != 1 || h[0] != "Authorization Bearer s3cr3t" {
		t.Errorf("headers %v", out["header"])
	}
	procs := out["processors"].(map[any]any)["logs"].([]any)
	attrs := map[string]string{}
	for _, p := range procs[1:] {
		m := p.(map[any]any)
		if m["context"] != "otel_resource_attributes" {
			t.Fatalf("processor %v", m)
		}
		attrs[m["key"].(string)] = m["value"].(string)
	}
	if procs[0].(map[any]any)["name"] != "opentelemetry_envelope" || attrs[AttrCluster] != "prod" || attrs[AttrNodeGroup] != "workers" || attrs[AttrHostname] != "ip-10-0-0-1" {
		t.Fatalf("resource attributes %v", attrs)
	}
	// The file name parser Fluent Bit applies, checked against kubelet's
	// file names (Onigmo and Go share this syntax).
	re := regexp.MustCompile(c.Parsers[0]["regex"])
	id := strings.Repeat("ab", 32)
	for file, want := range map[string][]string{
		"/var/log/containers/web-abc12_product_app-" + id + ".log":                        {"web-abc12", "product", "app", id},
		"/var/log/containers/cloudflared_platform-cloudflared_cloudflared-" + id + ".log": {"cloudflared", "platform-cloudflared", "cloudflared", id},
		"/var/log/containers/db_default_side-car-2-" + id + ".log":                        {"db", "default", "side-car-2", id},
	} {
		m := re.FindStringSubmatch(file)
		if m == nil || strings.Join(m[1:], " ") != strings.Join(want, " ") {
			t.Errorf("%s: %v, want %v", file, m, want)
		}
		for i, n := range []string{"pod", "namespace", "container", "container_id"} {
			if re.SubexpNames()[i+1] != n {
				t.Fatalf("group %d is %s", i+1, re.SubexpNames()[i+1])
			}
		}
	}
	if re.MatchString("/var/log/containers/not-a-kubelet-file.log") {
		t.Error("a file without the kubelet name shape matched")
	}
	// The renames turn the parser's groups into the OTLP attribute names.
	renames := c.Pipeline.Filters[1]["rename"].([]any)
	if len(renames) != 5 || renames[0] != "pod k8s.pod.name" || renames[3] != "container_id container.id" {
		t.Fatalf("renames %v", renames)
	}
}

func TestRenderRefusesInconsistentInput(t *testing.T) {
	o, _ := Parse("endpoint=https://otlp.example.com/v1/logs")
	if _, err := Render(o, node, map[string]string{"A": "b"}, DefaultPaths()); err == nil {
		t.Error("headers without headers-secret were rendered")
	}
	if _, err := Render(o, Node{Cluster: "prod", NodeGroup: "Bad_NG", Hostname: "h"}, nil, DefaultPaths()); err == nil {
		t.Error("an invalid NodeGroup was rendered")
	}
	o, _ = Parse("endpoint=https://otlp.example.com/v1/logs,headers-secret=true")
	_, err := Render(o, node, map[string]string{"Authorization": "Bearer x\r\nEvil: 1"}, DefaultPaths())
	if err == nil || strings.Contains(err.Error(), "Bearer") {
		t.Errorf("header injection: %v", err)
	}
}

func TestParseHeaders(t *testing.T) {
	h, err := ParseHeaders([]byte(`{"Authorization":"Bearer abc","X-Scope-OrgID":"team"}`))
	if err != nil || h["Authorization"] != "Bearer abc" || len(h) != 2 {
		t.Fatalf("%v %v", h, err)
	}
	for in, want := range map[string]string{
		`["a"]`:                           "is not a JSON object",
		`{"A":1}`:                         "is not a JSON object",
		`{"Authorization: secret-0":"v"}`: "a header name is not a valid HTTP header name",
		`{"Content-Type":"text/plain"}`:   "is set by the exporter",
		`{"a":"secret-1","A":"secret-2"}`: "are the same header",
		`{"X":" secret-value "}`:          "surrounding spaces",
		`{}{}`:                            "is not a JSON object",
	} {
		_, err := ParseHeaders([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret-") {
			t.Errorf("ParseHeaders(%s) = %v, want %q without the value", in, err, want)
		}
	}
}

func TestWriteConfigIsPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fluent-bit.yaml")
	for _, content := range []string{"first", "second"} {
		if err := WriteConfig(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v", st.Mode(), err)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Fatalf("content %q", b)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}
