// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"strings"
	"testing"
	"text/template"
)

// TestExecuteMatchesTextTemplate renders the real bootstrap template and
// a few constructs with execute and with text/template (missingkey=error)
// and requires the same bytes.
func TestExecuteMatchesTextTemplate(t *testing.T) {
	data := map[string]any{
		"Cluster": "prod", "NodeGroup": "workers", "Bucket": "b", "Region": "eu-west-1",
		"Arch": "arm64", "PauseImage": "registry.podmin.internal/pause:3.10", "OTelLogs": true,
		"Rows":        []string{"containerd|dependencies/containerd/x|sha512:aa", "runc|dependencies/runc/y|sha512:bb"},
		"PodsAPIGate": PodsAPIGate, "FluentBitConfigRoute": "/x", "None": []string{}, "Empty": "", "N": 3,
	}
	for name, text := range map[string]string{
		"aws.sh": awsScript,
		"fields": "a={{.Cluster}} b={{.OTelLogs}} n={{.N}}\n",
		"trim":   "(\n  {{- range .Rows}}\n  '{{.}}'\n  {{- end}}\n)\n",
		"if":     "{{if .OTelLogs}}yes{{else}}no{{end}} {{if .Empty}}set{{else}}empty{{end}} {{if .None}}some{{end}}",
		"else":   "{{range .None}}x{{else}}none{{end}} {{range .Rows}}{{if .}}[{{.}}]{{end}}{{end}}",
	} {
		var got bytes.Buffer
		if err := execute(&got, name, text, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var want bytes.Buffer
		if err := template.Must(template.New(name).Option("missingkey=error").Parse(text)).Execute(&want, data); err != nil {
			t.Fatalf("%s: text/template: %v", name, err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: execute gave\n%s\ntext/template gave\n%s", name, got.String(), want.String())
		}
	}
	if !strings.Contains(awsScript, "{{- range .Rows}}") {
		t.Fatal("the bootstrap template no longer ranges over the rows: the comparison above proves less than it claims")
	}
}

// TestExecuteRefusesWhatItDoesNotImplement names the construct and its
// place instead of rendering something else.
func TestExecuteRefusesWhatItDoesNotImplement(t *testing.T) {
	data := map[string]any{"A": "a", "M": map[string]any{"B": "b"}, "F": 1.5, "L": []int{1}}
	for text, want := range map[string]string{
		"x\n{{.Missing}}":              `t:2:2: map has no entry for key "Missing"`,
		"{{.M.B}}":                     "{{.M.B}} is not supported",
		"{{$x := .A}}{{$x}}":           "{{$x := .A}} is not supported",
		"{{.A | html}}":                `function "html" not defined`,
		"{{with .A}}{{.}}{{end}}":      "{{with .A}}{{.}}{{end}} is not supported",
		`{{define "x"}}y{{end}}`:       "{{define}} and {{block}} are not supported",
		"{{range .A}}{{end}}":          "range over string",
		"{{range .Rows}}{{.X}}{{end}}": `map has no entry for key "Rows"`,
		"{{.F}}":                       "cannot print a float64",
		"{{if .L}}x{{end}}":            "cannot test a []int",
		"{{range .L}}{{end}}":          "range over []int",
		`{{"lit"}}`:                    `{{"lit"}} is not supported`,
		"{{.A}":                        "bad character",
	} {
		var buf bytes.Buffer
		err := execute(&buf, "t", text, data)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", text, err, want)
		}
	}
	var buf bytes.Buffer
	if err := execute(&buf, "t", "{{range .R}}{{.X}}{{end}}", map[string]any{"R": []string{"s"}}); err == nil || !strings.Contains(err.Error(), "can't evaluate field X in type string") {
		t.Errorf("a field of a range element: %v", err)
	}
}
