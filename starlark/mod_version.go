// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/version"
)

func versionFamily() []*Builtin {
	return []*Builtin{{
		Name:    "version",
		Command: "version",
		Returns: "version",
		Doc: `Returns the version and build metadata of this Podmin.

Fields: version, commit, date, go_version, platform.`,
		impl: func(c *call) (star.Value, error) {
			if err := c.unpack(); err != nil {
				return nil, err
			}
			i := version.Current()
			return result("version", str("version", i.Version), str("commit", i.Commit), str("date", i.Date),
				str("go_version", i.GoVersion), str("platform", i.Platform)), nil
		},
	}}
}
