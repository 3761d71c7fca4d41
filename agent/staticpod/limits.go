// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io"

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

// fetchPayload reads a Pod or Service payload with one request, refusing
// it by the size the store announces before reading its body (and by
// what arrives, should the body be longer), and verifies it against the
// digest in its path.
func fetchPayload(ctx context.Context, store objstore.Store, p string) ([]byte, error) {
	r, err := objstore.OpenObject(ctx, store, p, objstore.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read payload %q: %w", p, err)
	}
	defer r.Close()
	if r.Info.Size > MaxPayloadBytes {
		return nil, tooLarge(p, r.Info.Size, MaxPayloadBytes)
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxPayloadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read payload %q: %w", p, err)
	}
	if len(data) > MaxPayloadBytes {
		return nil, tooLarge(p, int64(len(data)), MaxPayloadBytes)
	}
	if err := state.VerifyPayload(p, data); err != nil {
		return nil, err
	}
	return data, nil
}

func tooLarge(key string, size int64, limit int) error {
	return fmt.Errorf("%w: %s is %d bytes, more than the %d byte limit: it was not written by podmin; delete it and deploy again",
		ErrTooLarge, key, size, limit)
}
