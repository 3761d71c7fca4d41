// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/paths"
)

// providers lists the providers this binary offers.
func providers(dirs paths.Dirs) map[string]cloud.Provider {
	return map[string]cloud.Provider{
		"aws":   aws.Provider{},
		"local": local.New(dirs.Data),
	}
}
