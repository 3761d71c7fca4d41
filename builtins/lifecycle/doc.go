// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package lifecycle owns a cluster's lifecycle: setup, teardown and destroy,
// the validation of setup's flags, the CA secrets setup stores and destroy
// deletes, the published cluster configuration, the local provider's (empty)
// infrastructure, and the AWS infrastructure with its node bootstrap, which
// drive builtins/infra (the module and OpenTofu/Terraform), builtins/userdata
// and builtins/deps.
//
// It reaches the rest of Podmin only through Host, the narrow face that
// builtins.Env implements; it must not import builtins, starlark or cmd,
// print, prompt or parse flags.
package lifecycle
