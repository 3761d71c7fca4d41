// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package secrets is the provider-neutral contract for Podmin's secret
// stores: the Store interface, secret names (/<cluster>/<namespace>/<pod>/<key>
// and the /<cluster>/_system/ keys), value limits, and the sentinel errors
// every provider returns. Providers are sibling packages (local,
// parameterstore, secretsmanager); secretstest holds the conformance suite
// and the wire-protocol fakes of the AWS services.
//
// It must not import a provider, print or log, and it must never put a
// secret value into an error message: values are opaque bytes that leave
// this package only towards a store or a Pod mount.
package secrets
