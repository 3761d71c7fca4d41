// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"fmt"
	"unicode/utf8"
)

// Provider capabilities. Parameter Store's standard tier holds 4 KiB of
// UTF-8; Secrets Manager 64 KiB of string or binary data. The local store
// deliberately mirrors Parameter Store, so that what works locally also
// works on the default AWS provider.
var (
	ParameterStoreCapabilities = Capabilities{MaxBytes: 4 << 10}
	SecretsManagerCapabilities = Capabilities{MaxBytes: 64 << 10, Binary: true, RecoveryWindowDays: 30}
	LocalCapabilities          = ParameterStoreCapabilities
)

// CheckValue validates a value for name against a provider's capabilities.
// The error describes the value's size and encoding, never its content.
func CheckValue(provider string, c Capabilities, name Name, v Value) error {
	if name.IsZero() {
		return fmt.Errorf("%w: no secret name: build one with PodSecret or SystemSecret", ErrInvalid)
	}
	switch {
	case len(v) == 0:
		return fmt.Errorf("%w: %s: the value is empty: secrets need at least one byte", ErrInvalid, name)
	case len(v) > c.MaxBytes:
		hint := "store a smaller value"
		if c.MaxBytes < SecretsManagerCapabilities.MaxBytes {
			hint = fmt.Sprintf("store a smaller value or use --provider %s (up to %d bytes)", SecretsManager, SecretsManagerCapabilities.MaxBytes)
		}
		return fmt.Errorf("%w: %s: the value is %d bytes, more than the %d bytes %s accepts: %s", ErrInvalid, name, len(v), c.MaxBytes, provider, hint)
	case !c.Binary && !utf8.Valid(v):
		return fmt.Errorf("%w: %s: the value is not valid UTF-8, which %s requires: base64-encode it or use --provider %s for binary values", ErrInvalid, name, provider, SecretsManager)
	}
	return nil
}
