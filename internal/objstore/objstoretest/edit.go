// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"os"
	"testing"
)

// EditInPlace overwrites the bytes of the file at path at offset with
// data, keeping its inode, as an edit behind a local bucket's back does.
// With keepModTime it then restores the file's modification time, so the
// edit keeps the file's whole identity (inode, size, modification time).
func EditInPlace(tb testing.TB, path string, offset int64, data []byte, keepModTime bool) {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = f.WriteAt(data, offset)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	if keepModTime {
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			tb.Fatal(err)
		}
	}
}
