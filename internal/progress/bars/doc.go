// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package bars draws transfer progress as live bars on a terminal. It is
// kept apart from package progress so that programs which never draw on a
// terminal (the node agent) do not link the terminal drawing libraries.
package bars
