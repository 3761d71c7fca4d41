// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// image is one image the test builds with podmin build: a static program
// in a FROM-scratch image.
type image struct {
	tag, program, version string
	args                  []string // after the program in ENTRYPOINT
}

// pushImages builds and pushes the sandbox image, three versions of the
// workload and a broken one (the same program, whose command exits with
// status 3) through the podmin CLI, and returns the cluster references.
func (n *node) pushImages() map[string]string {
	start := time.Now()
	refs := map[string]string{}
	for _, img := range []image{{"pause:e2e", "pause", "", nil}, {"hello:v1", "hello", "v1", nil}, {"hello:v2", "hello", "v2", nil},
		{"hello:v3", "hello", "v3", nil}, {"hello:broken", "hello", "broken", []string{"exit", "3"}}} {
		ctx := filepath.Join(n.dir, "build", strings.ReplaceAll(img.tag, ":", "-"))
		must(n.t, os.MkdirAll(ctx, 0o755))
		b, err := os.ReadFile(filepath.Join(n.bin, img.program))
		must(n.t, err)
		must(n.t, os.WriteFile(filepath.Join(ctx, img.program), b, 0o755))
		containerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\n", img.program, img.program)
		if img.version != "" {
			containerfile += "ENV HELLO_VERSION=" + img.version + "\n"
		}
		entrypoint, _ := json.Marshal(append([]string{"/" + img.program}, img.args...))
		containerfile += fmt.Sprintf("ENTRYPOINT %s\n", entrypoint)
		must(n.t, os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(containerfile), 0o644))
		n.podmin("build", "-t", img.tag, ctx)
		refs[img.tag] = strings.TrimSpace(n.podmin("push", img.tag))
	}
	n.rep.line(fmt.Sprintf("images built and pushed with podmin build/push (pause:e2e, hello:v1, hello:v2, hello:v3, hello:broken) in %s: %s, %s",
		time.Since(start).Round(10*time.Millisecond), refs["hello:v1"], refs["pause:e2e"]))
	return refs
}
