// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package parameterstore is the aws-parameter-store secrets provider over
// SSM Parameter Store. It writes SecureString parameters, reads String,
// StringList and decrypted SecureString values, and has no recoverable
// deletion: destroy is permanent.
//
// It must not build AWS clients (internal/cloud/aws does) and must not put
// a value into an error or a log line.
package parameterstore
