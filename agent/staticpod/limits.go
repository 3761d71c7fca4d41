// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// Size limits of the objects the agent reads. Anything larger is refused
// before it is parsed: a damaged or hostile object must not exhaust the
// node's memory.
const (
	// MaxIndexBytes bounds deployments/index.json: room for well over
	// 50,000 deployments.
	MaxIndexBytes = 32 << 20
	// MaxPayloadBytes bounds one Pod or Service payload: a payload comes
	// from a manifest of at most manifest.MaxManifestBytes, plus what the
	// transformation adds.
	MaxPayloadBytes = 2 * manifest.MaxManifestBytes
)

// ErrTooLarge reports an object over its size limit.
var ErrTooLarge = errors.New("object exceeds its size limit")

// fetchPayload reads a Pod or Service payload, refusing it by its size
// before reading it, and verifies it against the digest in its path.
func fetchPayload(ctx context.Context, store objstore.Store, p string) ([]byte, error) {
	info, err := store.Head(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read payload %q: %w", p, err)
	}
	if info.Size > MaxPayloadBytes {
		return nil, tooLarge(p, info.Size, MaxPayloadBytes)
	}
	obj, err := store.Get(ctx, p, objstore.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read payload %q: %w", p, err)
	}
	if len(obj.Data) > MaxPayloadBytes {
		return nil, tooLarge(p, int64(len(obj.Data)), MaxPayloadBytes)
	}
	if err := state.VerifyPayload(p, obj.Data); err != nil {
		return nil, err
	}
	return obj.Data, nil
}

func tooLarge(key string, size int64, limit int) error {
	return fmt.Errorf("%w: %s is %d bytes, more than the %d byte limit: it was not written by podmin; delete it and deploy again",
		ErrTooLarge, key, size, limit)
}
