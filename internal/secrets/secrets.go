// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider names, as --provider, --secrets-provider and the
// podmin.dev/<provider> Pod annotations spell them.
const (
	ParameterStore = "aws-parameter-store"
	SecretsManager = "aws-secrets-manager"
	Local          = "local"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotFound reports a secret that does not exist.
	ErrNotFound = errors.New("secret not found")
	// ErrExists reports a create of a secret that already exists.
	ErrExists = errors.New("secret already exists")
	// ErrUnsupported reports an operation the provider does not have.
	ErrUnsupported = errors.New("operation not supported by this secrets provider")
	// ErrScheduledForDeletion reports a secret whose deletion is pending
	// (Secrets Manager's recovery window); only restore and destroy apply.
	ErrScheduledForDeletion = errors.New("secret is scheduled for deletion")
	// ErrInvalid reports a name or value that no provider call was made for.
	ErrInvalid = errors.New("invalid secret")
	// ErrKMS reports that the provider could not encrypt or decrypt the
	// value with its KMS key.
	ErrKMS = errors.New("secret could not be encrypted or decrypted with its KMS key")
)

// Value is a secret's bytes. Formatting it with fmt (any verb) or encoding
// it as JSON or text yields a placeholder, so a value that strays into a log
// line or an error message does not leak.
type Value []byte

// Format implements fmt.Formatter.
func (Value) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("<secret>")) }

// MarshalText implements encoding.TextMarshaler with the placeholder.
func (Value) MarshalText() ([]byte, error) { return []byte("<secret>"), nil }

// Capabilities describe what a provider can store and do. The checks they
// imply run before any provider call.
type Capabilities struct {
	// MaxBytes is the largest value, in bytes.
	MaxBytes int `json:"maxBytes"`
	// Binary is true when values need not be UTF-8.
	Binary bool `json:"binary"`
	// RecoveryWindowDays is how long Restore can cancel a Delete. Zero
	// means Delete and Restore fail with ErrUnsupported and Destroy is the
	// only way to remove a secret.
	RecoveryWindowDays int `json:"recoveryWindowDays,omitempty"`
}

// Entry is one secret in a listing. It never holds the value.
type Entry struct {
	// Name is the full provider name, /<cluster>/<namespace>/<pod>/<key>
	// or /<cluster>/_system/<key>.
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Key       string `json:"key"`
	// System is true for an allowlisted /<cluster>/_system/ key.
	System   bool   `json:"system,omitempty"`
	Provider string `json:"provider"`
	// LastModified is when the value last changed, when the provider
	// reports it.
	LastModified time.Time `json:"lastModified,omitzero"`
	// DeletionScheduled is when a pending deletion was requested
	// (Secrets Manager); zero for a live secret.
	DeletionScheduled time.Time `json:"deletionScheduled,omitzero"`
}

// Filter narrows a listing to part of one cluster. The zero Filter lists
// every pod secret and allowlisted system key of the cluster.
type Filter struct {
	// Namespace limits the listing to one namespace; with Pod it is
	// required.
	Namespace string
	// Pod limits the listing to one Pod of Namespace.
	Pod string
	// System limits the listing to the allowlisted system keys.
	System bool
}

// Store is one secrets provider. Implementations validate names and values
// before any call to the service, never include values in errors, and are
// safe for concurrent use.
type Store interface {
	// Provider returns the provider's name (ParameterStore, ...).
	Provider() string
	// Capabilities returns the provider's limits.
	Capabilities() Capabilities
	// Create stores a new secret; ErrExists when it exists.
	Create(ctx context.Context, name Name, value Value) error
	// Update replaces an existing secret's value; ErrNotFound when absent.
	Update(ctx context.Context, name Name, value Value) error
	// Read returns the current value; ErrNotFound when absent.
	Read(ctx context.Context, name Name) (Value, error)
	// List returns the visible secrets of cluster matching f in name
	// order. Internal system keys are never listed.
	List(ctx context.Context, cluster string, f Filter) ([]Entry, error)
	// Delete schedules a recoverable deletion, or ErrUnsupported.
	Delete(ctx context.Context, name Name) error
	// Restore cancels a scheduled deletion, or ErrUnsupported.
	Restore(ctx context.Context, name Name) error
	// Destroy deletes a secret permanently; ErrNotFound when absent.
	Destroy(ctx context.Context, name Name) error
}

// Unsupported returns the error for delete or restore on a provider without
// recoverable deletion: it names the provider and the alternative, and
// matches ErrUnsupported.
func Unsupported(provider string) error { return unsupportedError{provider} }

type unsupportedError struct{ provider string }

func (u unsupportedError) Error() string {
	return u.provider + " has no delete/restore: use destroy to delete permanently"
}

func (unsupportedError) Is(target error) bool { return target == ErrUnsupported }

// CreateNonceTag is the tag (Parameter Store) or metadata key (local store)
// under which a secret carries the nonce its creator drew before the create
// request. A secret's name proves nothing about who created it; only the
// creator knows the nonce.
const CreateNonceTag = "podmin:create-nonce"

// NonceStore is a Store that keeps a creator's nonce with a secret, so that
// the creator, and only it, can later prove the secret is one it created.
type NonceStore interface {
	Store
	// CreateWithNonce is Create that stores nonce with the secret in the
	// same request: a secret that exists after it carries the nonce
	// exactly when this request created it. ErrExists when it exists.
	CreateWithNonce(ctx context.Context, name Name, value Value, nonce string) error
	// CreateNonce returns the nonce stored with the secret, "" when it
	// carries none, or ErrNotFound when the secret is absent. Any other
	// error means the proof could not be read.
	CreateNonce(ctx context.Context, name Name) (string, error)
}

// CheckNonce rejects a nonce no store could keep: empty, longer than 128
// bytes or not printable ASCII without spaces.
func CheckNonce(nonce string) error {
	if nonce == "" || len(nonce) > 128 {
		return fmt.Errorf("%w: a create nonce must be 1 to 128 characters", ErrInvalid)
	}
	for _, c := range nonce {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("%w: a create nonce must be printable ASCII without spaces", ErrInvalid)
		}
	}
	return nil
}
