// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package secretstest is test support for secrets providers: Run, the
// conformance suite every provider must pass, and FakeSSM and
// FakeSecretsManager, in-process fakes that speak the AWS JSON 1.1 wire
// protocol (X-Amz-Target, real error codes and shapes, NextToken paging)
// to the real aws-sdk-go-v2 clients.
//
// It is imported only by tests. The fakes must never be offered as a
// provider: they keep values in memory without encryption.
package secretstest
