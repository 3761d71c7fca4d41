// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
)

// Env is what every operation needs from its surroundings (openv.Env, whose
// fields it has); its methods are the operations of every family. The CLI
// builds one from the process; tests build one around temporary
// directories.
type Env openv.Env

// op is e as the families take it.
func (e *Env) op() *openv.Env { return (*openv.Env)(e) }

// CurrentContext returns the selected context, or an error telling the
// operator how to connect.
func (e *Env) CurrentContext() (contexts.Context, error) { return e.op().CurrentContext() }

// ReadUserFile reads a file the operator named, relative to WorkDir,
// through the Files boundary; a file longer than limit bytes is an error.
func (e *Env) ReadUserFile(name string, limit int64) ([]byte, error) {
	return e.op().ReadUserFile(name, limit)
}

// What every family shares: the boundaries, the refusals and the warnings.
type (
	ContextsFile   = openv.ContextsFile
	Files          = openv.Files
	ReadJail       = openv.ReadJail
	ConfigContexts = openv.ConfigContexts
	OSFiles        = openv.OSFiles
	Warning        = openv.Warning
	PinnedImage    = openv.PinnedImage
)

// Warning checks.
const (
	CheckManifest  = openv.CheckManifest
	CheckNodeGroup = openv.CheckNodeGroup
	CheckImage     = openv.CheckImage
	CheckSecret    = openv.CheckSecret
)

// Errors every family may return; the CLI maps them to exit codes.
var (
	ErrInvalidArgument = openv.ErrInvalidArgument
	ErrNotConfirmed    = openv.ErrNotConfirmed
	ErrNotOwned        = openv.ErrNotOwned
	ErrTimeout         = openv.ErrTimeout
	ErrNoSecrets       = openv.ErrNoSecrets
)

// InvalidArgument marks err as ErrInvalidArgument (openv.InvalidArgument).
func InvalidArgument(err error) error { return openv.InvalidArgument(err) }

// ManifestWarnings are a validated deployment's warnings as operations
// report them.
func ManifestWarnings(ex *Extracted) []Warning { return openv.ManifestWarnings(ex.Warnings) }
