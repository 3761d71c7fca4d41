// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package ec2test is a fake of the EC2 API for tests: an HTTP server
// speaking the real Query protocol (form-encoded POST, XML responses and
// errors) to the real SDK client. It holds only what Podmin's checks read.
// It is never shipped as a provider.
package ec2test
