// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import "errors"

// ErrInvalidArgument marks a value given to an operation that breaks one
// of its rules — a NodeGroup ID, a resource quantity, a secret key, a wait
// goal, a pick — found from the options alone, before anything is read or
// written. The CLI exits 2 on it, as on a bad flag value, whether the
// value came from a flag or from a recipe.
var ErrInvalidArgument = errors.New("invalid argument")

// InvalidArgument marks err (nil stays nil) as ErrInvalidArgument without
// changing its message; errors.Is and errors.As still see err.
func InvalidArgument(err error) error {
	if err == nil {
		return nil
	}
	return invalidArgument{err}
}

type invalidArgument struct{ err error }

func (e invalidArgument) Error() string   { return e.err.Error() }
func (e invalidArgument) Unwrap() []error { return []error{e.err, ErrInvalidArgument} }
