// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openvtest

import (
	"path/filepath"
	"testing"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/paths"
)

// NewEnv returns an environment whose state directories are under the
// test's temporary directory, with the aws and local providers.
func NewEnv(t testing.TB) *openv.Env {
	root := t.TempDir()
	dirs := paths.Dirs{
		Config: filepath.Join(root, "config"), Cache: filepath.Join(root, "cache"),
		Data: filepath.Join(root, "data"), Runtime: filepath.Join(root, "run"),
	}
	return &openv.Env{Dirs: dirs, Providers: map[string]cloud.Provider{
		"aws":   aws.Provider{},
		"local": local.New(dirs.Data),
	}}
}
