// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidKey reports a key that a directory bucket cannot store: a
// malformed key, a key inside the reserved .podmin folder, or a key that
// would need a path to be both a file and a directory.
var ErrInvalidKey = errors.New("invalid key")

const (
	// metaDir is the one hidden folder that holds all store metadata.
	metaDir = ".podmin"
	// maxKeyLen matches S3's limit on key length.
	maxKeyLen = 1024
	// maxSegmentLen is NAME_MAX on common filesystems.
	maxSegmentLen = 255
)

// validateKey reports why key cannot name a file inside the bucket. The rules
// are those of a filesystem path, so they live here and not in objstore: an
// S3 bucket accepts every one of these keys.
func validateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(key) > maxKeyLen:
		return fmt.Errorf("%w: key %q… is %d bytes long: keys are at most %d bytes", ErrInvalidKey, key[:32], len(key), maxKeyLen)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key %q contains a NUL byte", ErrInvalidKey, key)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("%w: key %q starts with \"/\": keys are relative to the bucket", ErrInvalidKey, key)
	}
	for i, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("%w: key %q has an empty path segment: remove the repeated or trailing \"/\"", ErrInvalidKey, key)
		case seg == "." || seg == "..":
			return fmt.Errorf("%w: key %q has a %q path segment", ErrInvalidKey, key, seg)
		case i == 0 && seg == metaDir:
			return fmt.Errorf("%w: key %q is inside %s, which a local bucket reserves for its metadata", ErrInvalidKey, key, metaDir)
		case len(seg) > maxSegmentLen:
			return fmt.Errorf("%w: key %q has a path segment longer than %d bytes", ErrInvalidKey, key, maxSegmentLen)
		}
	}
	return nil
}
