// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package progress

import (
	"fmt"
	"io"
	"time"
)

// Sink receives the progress of transfers. Implementations are safe for
// concurrent use: blobs move in parallel.
type Sink interface {
	// Begin starts a transfer described by title ("push hello:v1") of
	// total bytes; zero means the total is not known up front and grows
	// as items start.
	Begin(title string, total int64) Transfer
}

// Transfer is one operation's set of items (blobs or files).
type Transfer interface {
	// Item starts moving one blob or file of size bytes.
	Item(name string, size int64) Item
	// Skip takes size bytes that need no transfer (already present) out
	// of the total.
	Skip(size int64)
	// End finishes the transfer; a non-nil err marks it failed. It
	// returns after everything it shows has been written.
	End(err error)
}

// Item is one blob or file in flight.
type Item interface {
	// Add records n more bytes moved.
	Add(n int64)
	// Done marks the item complete.
	Done()
}

// Or returns s, or a Sink that shows nothing when s is nil.
func Or(s Sink) Sink {
	if s == nil {
		return discard{}
	}
	return s
}

type discard struct{}

func (discard) Begin(string, int64) Transfer { return discard{} }
func (discard) Item(string, int64) Item      { return discard{} }
func (discard) Skip(int64)                   {}
func (discard) End(error)                    {}
func (discard) Add(int64)                    {}
func (discard) Done()                        {}

// Reader counts what is read from r into it.
func Reader(it Item, r io.Reader) io.Reader { return &reader{it: it, r: r} }

type reader struct {
	it Item
	r  io.Reader
}

func (c *reader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.it.Add(int64(n))
	}
	return n, err
}

// ShortName shortens a digest such as "sha256:0123…" to its first twelve
// hex digits, as container tools show blobs.
func ShortName(digest string) string {
	for i := 0; i < len(digest); i++ {
		if digest[i] == ':' {
			digest = digest[i+1:]
			break
		}
	}
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// Size renders a byte count with binary units ("12.5 MiB").
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Duration renders a remaining or elapsed time rounded to the second.
func Duration(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	return d.Round(time.Second).String()
}
