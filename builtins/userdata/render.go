// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/otellogs"
)

//go:embed aws.sh.tmpl
var awsScript string

// MaxUserData is the provider's limit on user-data (AWS: 16 KiB), checked
// against the gzip bytes before encoding.
const MaxUserData = 16 << 10

// PodsAPIGate is the kubelet feature gate of the alpha local Pods API
// (/var/lib/kubelet/pods-api/pods-api.sock).
const PodsAPIGate = "PodsAPI"

// Node is what a NodeGroup's bootstrap needs.
type Node struct {
	Cluster, NodeGroup, Bucket, Region string
	Arch                               deps.Arch
	// Manifest is the published dependency manifest; only Arch's files
	// are used.
	Manifest *deps.Manifest
	// OTelLogs installs Fluent Bit and libpq5 (they must be published).
	OTelLogs bool
}

// Rendered is a bootstrap script in each form.
type Rendered struct {
	// Script is the stripped shell script.
	Script []byte
	// Gzip is Script compressed deterministically: the same input
	// always gives the same bytes.
	Gzip []byte
	// Base64 is Gzip encoded once, for the launch template.
	Base64 string
}

// safe values contain nothing the shell or a YAML/TOML file would read
// specially.
var (
	safeName  = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
	safeField = regexp.MustCompile(`^[A-Za-z0-9._+:/@-]+$`)
)

// canonicalKeys are the dependencies every node needs.
func canonicalKeys() []string {
	var keys []string
	for _, d := range deps.Selected(nil) {
		keys = append(keys, d.Key)
	}
	return keys
}

// Rows returns the compact "canonical|object|digest" rows for arch,
// requiring the complete canonical set (plus the features' packages).
func Rows(m *deps.Manifest, arch deps.Arch, features []deps.Feature) ([]string, error) {
	if m == nil {
		return nil, fmt.Errorf("no dependency manifest: run setup to publish dependencies first")
	}
	var rows, missing []string
	for _, d := range deps.Selected(features) {
		if d.Optional == deps.NAT64 {
			continue
		}
		f, ok := m.Dependencies[d.Key][arch]
		if !ok {
			missing = append(missing, d.Key)
			continue
		}
		for _, v := range []string{f.Path, f.Digest} {
			if !safeField.MatchString(v) {
				return nil, fmt.Errorf("dependency %s %s: %q has characters user-data cannot carry", d.Key, arch, v)
			}
		}
		if !strings.HasPrefix(f.Path, "dependencies/"+d.Key+"/") {
			return nil, fmt.Errorf("dependency %s %s: path %q is not beneath dependencies/%s/", d.Key, arch, f.Path, d.Key)
		}
		rows = append(rows, d.Canonical+"|"+f.Path+"|"+f.Digest)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the dependency manifest lacks %s for %s: run setup to publish them", strings.Join(missing, ", "), arch)
	}
	return rows, nil
}

// RenderNode renders aws.sh for one NodeGroup.
func RenderNode(n Node) (Rendered, error) {
	for name, v := range map[string]string{"cluster": n.Cluster, "nodegroup": n.NodeGroup, "bucket": n.Bucket, "region": n.Region} {
		if !safeName.MatchString(v) {
			return Rendered{}, fmt.Errorf("user-data: %s %q is not a valid name", name, v)
		}
	}
	if !slices.Contains(deps.Archs, n.Arch) {
		return Rendered{}, fmt.Errorf("user-data: unsupported architecture %q", n.Arch)
	}
	var features []deps.Feature
	if n.OTelLogs {
		features = append(features, deps.OTelLogs)
	}
	rows, err := Rows(n.Manifest, n.Arch, features)
	if err != nil {
		return Rendered{}, err
	}
	pause, ok := n.Manifest.Images["pause"]
	if !ok {
		return Rendered{}, fmt.Errorf("the dependency manifest lacks the pause image: run setup to publish it")
	}
	pauseRef := "registry.podmin.internal/" + pause.Path + ":" + pause.Version
	if !safeField.MatchString(pauseRef) {
		return Rendered{}, fmt.Errorf("pause image %q has characters user-data cannot carry", pauseRef)
	}
	return render("aws.sh", awsScript, map[string]any{
		"Cluster": n.Cluster, "NodeGroup": n.NodeGroup, "Bucket": n.Bucket, "Region": n.Region,
		"Arch": string(n.Arch), "PauseImage": pauseRef, "OTelLogs": n.OTelLogs, "Rows": rows,
		"PodsAPIGate": PodsAPIGate, "FluentBitConfigRoute": otellogs.FluentBitConfigRoute,
	})
}

// render executes a script template (see execute), strips it and
// encodes it. An error is a Podmin bug: the templates are embedded.
func render(name, text string, data map[string]any) (Rendered, error) {
	var buf bytes.Buffer
	if err := execute(&buf, name, text, data); err != nil {
		return Rendered{}, fmt.Errorf("%s: %w", name, err)
	}
	script := Strip(buf.Bytes())
	gz, err := Gzip(script)
	if err != nil {
		return Rendered{}, err
	}
	if len(gz) > MaxUserData {
		return Rendered{}, fmt.Errorf("%s: user-data is %d bytes compressed, more than the provider's %d", name, len(gz), MaxUserData)
	}
	return Rendered{Script: script, Gzip: gz, Base64: base64.StdEncoding.EncodeToString(gz)}, nil
}

// Strip removes comment lines (keeping "#!" lines) and blank lines, and
// trailing spaces. The templates keep comments out of heredocs, whose
// content would otherwise lose lines.
func Strip(script []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(script), "\n") {
		line = strings.TrimRight(line, " \t\r")
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || (strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, "#!")) {
			continue
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// Gzip compresses b with a fixed header (no name, no time), so identical
// input gives identical bytes.
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
