// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package paths

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Dirs are the four per-user state directories. Each already ends in the
// "podmin" component; none is created by Resolve.
type Dirs struct {
	Config  string `json:"config"`
	Cache   string `json:"cache"`
	Data    string `json:"data"`
	Runtime string `json:"runtime"`
}

// Env is what Resolve reads from the process, injected so tests can model
// every operating system on one machine.
type Env struct {
	// GOOS is runtime.GOOS ("linux", "darwin", "windows", ...).
	GOOS string
	// Home is the user's home directory.
	Home string
	// Getenv looks up an environment variable.
	Getenv func(string) string
}

// Resolve applies the table in the specification: on Linux the XDG base
// directories with their documented fallbacks; on every other OS a single
// ~/.podmin tree. An explicitly set XDG variable wins on every OS. The XDG
// specification says relative values are invalid and must be ignored, so
// they are.
func Resolve(env Env) (Dirs, error) {
	if env.Getenv == nil {
		return Dirs{}, errors.New("paths: no environment lookup given")
	}
	xdg := func(name string) string {
		v := env.Getenv(name)
		if v == "" || !filepath.IsAbs(v) {
			return ""
		}
		return filepath.Join(v, "podmin")
	}
	needHome := func() error {
		if env.Home == "" {
			return errors.New("cannot find the home directory: set HOME (or the XDG_CONFIG_HOME, XDG_CACHE_HOME, XDG_DATA_HOME and XDG_RUNTIME_DIR variables)")
		}
		return nil
	}
	pick := func(xdgVar, linuxFallback, otherFallback string) (string, error) {
		if d := xdg(xdgVar); d != "" {
			return d, nil
		}
		if err := needHome(); err != nil {
			return "", err
		}
		if env.GOOS == "linux" && linuxFallback != "" {
			return filepath.Join(env.Home, linuxFallback, "podmin"), nil
		}
		return filepath.Join(env.Home, ".podmin", otherFallback), nil
	}
	var d Dirs
	var err error
	if d.Config, err = pick("XDG_CONFIG_HOME", ".config", "config"); err != nil {
		return Dirs{}, err
	}
	if d.Cache, err = pick("XDG_CACHE_HOME", ".cache", "cache"); err != nil {
		return Dirs{}, err
	}
	if d.Data, err = pick("XDG_DATA_HOME", filepath.Join(".local", "share"), "data"); err != nil {
		return Dirs{}, err
	}
	// The runtime directory has no home-relative XDG default on Linux either.
	if d.Runtime, err = pick("XDG_RUNTIME_DIR", "", "run"); err != nil {
		return Dirs{}, err
	}
	return d, nil
}

// String renders the directories for diagnostics.
func (d Dirs) String() string {
	return fmt.Sprintf("config=%s cache=%s data=%s runtime=%s", d.Config, d.Cache, d.Data, d.Runtime)
}
