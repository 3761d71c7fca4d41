// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package otellogs

import (
	"errors"
	"fmt"
	"path"
	"sort"

	yaml "go.yaml.in/yaml/v2"

	"podmin.dev/podmin/internal/ids"
)

// Node is what the resource attributes name: they are the same for every
// record a node sends.
type Node struct {
	Cluster   string
	NodeGroup string
	Hostname  string
}

// Paths are the node files the configuration refers to.
type Paths struct {
	// StateDir holds the tail offsets database and the filesystem queue;
	// it survives restarts so offsets and queued records are kept.
	StateDir string
	// CAFile is the agent-installed private CA bundle (used with ca=).
	CAFile string
	// CertFile and KeyFile are the telemetry client identity (mtls=true),
	// through the agent's selected generation.
	CertFile, KeyFile string
}

// DefaultPaths are the node's locations.
func DefaultPaths() Paths {
	return Paths{
		StateDir: "/var/lib/podmin/fluent-bit",
		CAFile:   "/run/podmin/telemetry/ca.pem",
		CertFile: "/run/podmin/telemetry/current/tls.crt",
		KeyFile:  "/run/podmin/telemetry/current/tls.key",
	}
}

// Resource attribute names.
const (
	AttrCluster   = "podmin.cluster.id"
	AttrNodeGroup = "podmin.nodegroup.id"
	AttrHostname  = "host.name"
)

// ContainerLogGlob is what the collector tails: kubelet's CRI log files.
const ContainerLogGlob = "/var/log/containers/*.log"

// FileNameRegex derives the per-record Kubernetes attributes from a
// kubelet-managed file name, <pod>_<namespace>_<container>-<id>.log. Pod
// and namespace names cannot hold '_'; a container name may hold '-',
// so the 64-hex container ID is matched from the end.
const FileNameRegex = `^/var/log/containers/(?<pod>[^_/]+)_(?<namespace>[^_/]+)_(?<container>[^/]+)-(?<container_id>[0-9a-f]{64})\.log$`

// QueueLimit bounds the filesystem output queue.
const QueueLimit = "1G"

const tag = "containers.*"

// Render returns the Fluent Bit YAML configuration for o on node n.
// headers are the exporter headers (nil without headers-secret); the
// result then holds secrets and must be written with WriteConfig.
func Render(o Options, n Node, headers map[string]string, p Paths) ([]byte, error) {
	if o.Endpoint == nil {
		return nil, errors.New("no endpoint: parse the --otel-logs value with Parse first")
	}
	if err := ids.ValidateNodeGroup(n.NodeGroup); err != nil {
		return nil, fmt.Errorf("resource attributes: %w", err)
	}
	if n.Cluster == "" || n.Hostname == "" {
		return nil, errors.New("resource attributes need the cluster ID and the node's hostname")
	}
	if o.HeadersSecret != (headers != nil) {
		return nil, fmt.Errorf("headers-secret=%t but headers were %s: fetch /<cluster>/_system/otel-logs-headers exactly when headers-secret=true",
			o.HeadersSecret, map[bool]string{true: "given", false: "not given"}[headers != nil])
	}
	if err := CheckHeaders(headers); err != nil {
		return nil, err
	}
	if _, _, ok := o.CABucketKey(); ok && p.CAFile == "" {
		return nil, errors.New("ca= needs the installed CA bundle's path")
	}
	service := yaml.MapSlice{
		{Key: "flush", Value: 1},
		{Key: "log_level", Value: "info"},
		{Key: "http_server", Value: "off"},
		{Key: "storage.path", Value: path.Join(p.StateDir, "storage")},
		{Key: "storage.sync", Value: "normal"},
		{Key: "storage.checksum", Value: "off"},
		{Key: "storage.backlog.mem_limit", Value: "16M"},
	}
	parsers := []yaml.MapSlice{{
		{Key: "name", Value: "podmin-container-file"},
		{Key: "format", Value: "regex"},
		{Key: "regex", Value: FileNameRegex},
	}}
	input := yaml.MapSlice{
		{Key: "name", Value: "tail"},
		{Key: "tag", Value: tag},
		{Key: "path", Value: ContainerLogGlob},
		{Key: "multiline.parser", Value: "cri"},
		{Key: "path_key", Value: "log.file.path"},
		{Key: "db", Value: path.Join(p.StateDir, "tail.db")},
		{Key: "db.sync", Value: "normal"},
		{Key: "db.locking", Value: true},
		// With the offsets database, reading new files from their start
		// loses nothing a container wrote before Fluent Bit started and
		// repeats nothing after a restart.
		{Key: "read_from_head", Value: true},
		{Key: "refresh_interval", Value: 10},
		{Key: "rotate_wait", Value: 30},
		{Key: "skip_long_lines", Value: "on"},
		{Key: "storage.type", Value: "filesystem"},
	}
	filters := []yaml.MapSlice{
		{
			{Key: "name", Value: "parser"},
			{Key: "match", Value: tag},
			{Key: "key_name", Value: "log.file.path"},
			{Key: "parser", Value: "podmin-container-file"},
			{Key: "reserve_data", Value: "on"},
			{Key: "preserve_key", Value: "on"},
		},
		{
			{Key: "name", Value: "modify"},
			{Key: "match", Value: tag},
			{Key: "rename", Value: []string{
				"pod k8s.pod.name", "namespace k8s.namespace.name", "container k8s.container.name",
				"container_id container.id", "stream log.iostream",
			}},
			{Key: "remove", Value: "_p"},
		},
	}
	output := yaml.MapSlice{
		{Key: "name", Value: "opentelemetry"},
		{Key: "match", Value: tag},
		{Key: "host", Value: o.Host()},
		{Key: "port", Value: o.Port()},
	}
	if o.Protocol == GRPC {
		output = append(output, yaml.MapItem{Key: "grpc", Value: "on"}, yaml.MapItem{Key: "http2", Value: "on"},
			yaml.MapItem{Key: "grpc_logs_uri", Value: o.URI()})
	} else {
		output = append(output, yaml.MapItem{Key: "grpc", Value: "off"}, yaml.MapItem{Key: "logs_uri", Value: o.URI()})
	}
	output = append(output,
		yaml.MapItem{Key: "tls", Value: "on"},
		yaml.MapItem{Key: "tls.verify", Value: "on"},
		yaml.MapItem{Key: "tls.verify_hostname", Value: "on"},
		yaml.MapItem{Key: "tls.vhost", Value: o.Host()},
	)
	if _, _, ok := o.CABucketKey(); ok {
		output = append(output, yaml.MapItem{Key: "tls.ca_file", Value: p.CAFile})
	}
	if o.MTLS {
		if p.CertFile == "" || p.KeyFile == "" {
			return nil, errors.New("mtls=true needs the telemetry certificate and key paths")
		}
		output = append(output, yaml.MapItem{Key: "tls.crt_file", Value: p.CertFile}, yaml.MapItem{Key: "tls.key_file", Value: p.KeyFile})
	}
	if len(headers) > 0 {
		names := make([]string, 0, len(headers))
		for k := range headers {
			names = append(names, k)
		}
		sort.Strings(names)
		lines := make([]string, len(names))
		for i, k := range names {
			lines[i] = k + " " + headers[k]
		}
		output = append(output, yaml.MapItem{Key: "header", Value: lines})
	}
	resource := []yaml.MapSlice{{{Key: "name", Value: "opentelemetry_envelope"}}}
	for _, a := range [][2]string{{AttrCluster, n.Cluster}, {AttrNodeGroup, n.NodeGroup}, {AttrHostname, n.Hostname}} {
		resource = append(resource, yaml.MapSlice{
			{Key: "name", Value: "content_modifier"},
			{Key: "context", Value: "otel_resource_attributes"},
			{Key: "action", Value: "upsert"},
			{Key: "key", Value: a[0]},
			{Key: "value", Value: a[1]},
		})
	}
	output = append(output,
		yaml.MapItem{Key: "logs_body_key", Value: "$log"},
		yaml.MapItem{Key: "logs_body_key_attributes", Value: true},
		yaml.MapItem{Key: "storage.total_limit_size", Value: QueueLimit},
		yaml.MapItem{Key: "retry_limit", Value: "no_limits"},
		yaml.MapItem{Key: "net.keepalive", Value: "on"},
		yaml.MapItem{Key: "processors", Value: yaml.MapSlice{{Key: "logs", Value: resource}}},
	)
	doc := yaml.MapSlice{
		{Key: "service", Value: service},
		{Key: "parsers", Value: parsers},
		{Key: "pipeline", Value: yaml.MapSlice{
			{Key: "inputs", Value: []yaml.MapSlice{input}},
			{Key: "filters", Value: filters},
			{Key: "outputs", Value: []yaml.MapSlice{output}},
		}},
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("render the Fluent Bit configuration: %w", err)
	}
	return append([]byte("# Generated by Podmin before each Fluent Bit start; do not edit.\n"), out...), nil
}
