// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile (-X podmin.dev/podmin/internal/version.Version=...).
var (
	// Version is the release version, "dev" for an untagged build.
	Version = "dev"
	// Commit is the source commit the binary was built from.
	Commit = ""
	// Date is the build time in RFC 3339.
	Date = ""
)

// Info is the build metadata of the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Current returns the metadata, falling back to the VCS stamp Go records
// when the Makefile did not inject a commit.
func Current() Info {
	i := Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if i.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					i.Commit = s.Value
				case "vcs.time":
					if i.Date == "" {
						i.Date = s.Value
					}
				}
			}
		}
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	if i.Date == "" {
		i.Date = "unknown"
	}
	return i
}

// String is the one-line form printed by "version" and "--version".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
}
