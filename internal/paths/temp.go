// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package paths

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts every temporary file name Podmin creates beside a file
// it replaces. The name never includes the final file's name, so any file
// name up to the system's limit can be written: a temporary name is always
// TempNameLen bytes. The leading dot hides it from kubelet and from globs.
const TempPrefix = ".~tmp-"

// TempNameLen is the length of every temporary file name: TempPrefix and
// 16 hexadecimal characters.
const TempNameLen = len(TempPrefix) + 16

// IsTemp reports whether name (a base name) is a temporary file name of
// CreateTemp, which a crash can leave behind.
func IsTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, TempPrefix)
	if !ok || len(rest) != 16 {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CreateTemp creates a new temporary file in dir with a short fixed-length
// random name (see TempPrefix), open for writing with mode 0600.
func CreateTemp(dir string) (*os.File, error) {
	var b [8]byte
	for range 16 {
		_, _ = rand.Read(b[:])
		name := filepath.Join(dir, TempPrefix+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("create a temporary file in %s: every random name was taken", dir)
}
