// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package tftest finds the real Terraform binary and the AWS provider for
// tests that run it: a filesystem mirror named by PODMIN_TF_PROVIDER_MIRROR
// or found in one of Terraform's standard plugin directories, else the
// public registry when it is reachable. Without either, the test is skipped
// with the reason. It is used only by tests.
package tftest
