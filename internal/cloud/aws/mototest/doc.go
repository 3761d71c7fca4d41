// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package mototest starts moto's server (moto 5.2) on a loopback port for
// tests that need a cloud that remembers what an apply created: the AWS
// module applied for real, and setup and destroy through the podmin binary.
// launcher.py, beside this file, patches the moto behaviours that would
// otherwise stop the module (each is commented there). Where Python or
// moto is missing, the test is skipped with that reason. It is test
// tooling only.
package mototest
