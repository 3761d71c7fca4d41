// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// workloads is where the test's own programs live: beneath realnode,
// which both tests build from.
const workloads = "podmin.dev/podmin/cmd/podmin-agent/realnode/"

// BuildPrograms builds podmin, podmin-agent and the test's programs
// (hello, the workload; pause, the sandbox; shimoom, the gVisor shim
// wrapper) into bin, static, as the workload and sandbox images need
// them.
func BuildPrograms(bin string) error {
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "podmin.dev/podmin/cmd/podmin", "podmin.dev/podmin/cmd/podmin-agent",
		workloads+"hello", workloads+"pause", workloads+"shimoom")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the programs: %w\n%s", err, out)
	}
	return nil
}

// Image is one image a test builds with podmin build: a static program
// of bin in a FROM-scratch image.
type Image struct {
	Tag, Program, Version string
	// Args follow the program in ENTRYPOINT.
	Args []string
}

// PushImages builds each image in a context beneath dir from the program
// in bin with podmin build, pushes it with podmin push (run by podmin,
// which returns the command's standard output) and returns the cluster
// references by tag.
func PushImages(dir, bin string, podmin func(args ...string) (string, error), images []Image) (map[string]string, error) {
	refs := map[string]string{}
	for _, img := range images {
		ctx := filepath.Join(dir, strings.ReplaceAll(img.Tag, ":", "-"))
		if err := os.MkdirAll(ctx, 0o755); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(bin, img.Program))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(ctx, img.Program), b, 0o755); err != nil {
			return nil, err
		}
		containerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\n", img.Program, img.Program)
		if img.Version != "" {
			containerfile += "ENV HELLO_VERSION=" + img.Version + "\n"
		}
		entrypoint, _ := json.Marshal(append([]string{"/" + img.Program}, img.Args...))
		containerfile += fmt.Sprintf("ENTRYPOINT %s\n", entrypoint)
		if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(containerfile), 0o644); err != nil {
			return nil, err
		}
		if _, err := podmin("build", "-t", img.Tag, ctx); err != nil {
			return nil, err
		}
		out, err := podmin("push", img.Tag)
		if err != nil {
			return nil, err
		}
		refs[img.Tag] = strings.TrimSpace(out)
	}
	return refs, nil
}
