// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"

	"golang.org/x/term"

	"podmin.dev/podmin/internal/progress"
	"podmin.dev/podmin/internal/progress/bars"
)

// transferSink decides how long transfers are shown on standard error:
// live bars when raw (the process's standard error) is a terminal, plain
// periodic lines otherwise, so CI logs stay readable. w is the scrubbing
// writer in front of raw; every byte goes through it. The returned
// function prints one progress message without breaking the bars.
// Nothing here ever writes to standard output.
func transferSink(raw, w io.Writer) (progress.Sink, func(string)) {
	if f, ok := raw.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b := bars.New(w, int(f.Fd()))
		return b, b.Log
	}
	l := &progress.Lines{W: w}
	return l, l.Log
}
