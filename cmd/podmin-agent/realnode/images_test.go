// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"fmt"
	"path/filepath"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// pushImages builds and pushes the sandbox image, three versions of the
// workload and a broken one (the same program, whose command exits with
// status 3) through the podmin CLI, and returns the cluster references.
func (n *node) pushImages() map[string]string {
	start := time.Now()
	refs, err := e2enode.PushImages(filepath.Join(n.dir, "build"), n.bin, func(args ...string) (string, error) { return n.podminErr(nil, args...) },
		[]e2enode.Image{{Tag: "pause:e2e", Program: "pause"}, {Tag: "hello:v1", Program: "hello", Version: "v1"},
			{Tag: "hello:v2", Program: "hello", Version: "v2"}, {Tag: "hello:v3", Program: "hello", Version: "v3"},
			{Tag: "hello:broken", Program: "hello", Version: "broken", Args: []string{"exit", "3"}}})
	must(n.t, err)
	n.rep.Line(fmt.Sprintf("images built and pushed with podmin build/push (pause:e2e, hello:v1, hello:v2, hello:v3, hello:broken) in %s: %s, %s",
		time.Since(start).Round(10*time.Millisecond), refs["hello:v1"], refs["pause:e2e"]))
	return refs
}
