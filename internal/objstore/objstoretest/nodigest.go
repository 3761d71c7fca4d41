// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"context"

	"podmin.dev/podmin/internal/objstore"
)

// WithoutContentDigests wraps s so that Head reports no content digest,
// as S3 without checksums does: tests of what a store without them can
// and cannot tell run on the local store.
func WithoutContentDigests(s objstore.Store) objstore.Store { return noContentDigest{s} }

type noContentDigest struct{ objstore.Store }

func (s noContentDigest) Head(ctx context.Context, key string) (objstore.Info, error) {
	info, err := s.Store.Head(ctx, key)
	info.ContentSHA256 = ""
	return info, err
}
