// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package secretsmanager is the aws-secrets-manager secrets provider over
// AWS Secrets Manager. UTF-8 values are stored as SecretString and other
// bytes as SecretBinary, so binary values round-trip exactly. Delete
// schedules a deletion with a 30-day recovery window that Restore cancels;
// Destroy deletes permanently.
//
// It must not build AWS clients (internal/cloud/aws does) and must not put
// a value into an error or a log line.
package secretsmanager
