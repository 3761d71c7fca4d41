// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package syncio holds I/O helpers safe for concurrent use, such as the
// log sinks tests hand to code that writes from several goroutines.
package syncio
