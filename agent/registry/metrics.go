// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// refusal is why the registry refused (or aborted) a response.
type refusal int

const (
	// refusedNotFound: no such repository, tag, manifest or blob.
	refusedNotFound refusal = iota
	// refusedInvalid: a malformed name or digest, or a method other than
	// GET and HEAD.
	refusedInvalid
	// refusedRange: a Range that is not one satisfiable byte range.
	refusedRange
	// refusedDigestMismatch: the stored bytes did not match their digest
	// on this request (refused, or aborted mid-stream).
	refusedDigestMismatch
	// refusedKnownBad: a blob version that failed verification before,
	// refused at once.
	refusedKnownBad
	// refusedStorage: reading the bucket failed.
	refusedStorage
	// refusedCancelled: the request ended while it waited for manifest
	// memory.
	refusedCancelled
	numRefusals
)

// refusalNames are the reason label values, by refusal.
var refusalNames = [numRefusals]string{
	refusedNotFound:       "not_found",
	refusedInvalid:        "invalid_request",
	refusedRange:          "range_not_satisfiable",
	refusedDigestMismatch: "digest_mismatch",
	refusedKnownBad:       "known_bad",
	refusedStorage:        "storage_error",
	refusedCancelled:      "cancelled",
}

// refusalOf is the reason of an error response, by its status unless it
// was set where the error was made.
func refusalOf(e *apiError) refusal {
	switch {
	case e.reason != nil:
		return *e.reason
	case e.status == http.StatusNotFound:
		return refusedNotFound
	case e.status == http.StatusRequestedRangeNotSatisfiable:
		return refusedRange
	case e.status >= 500:
		return refusedStorage
	}
	return refusedInvalid
}

// stats are the registry's counters.
type stats struct {
	manifestBytes, blobBytes atomic.Uint64
	refusals                 [numRefusals]atomic.Uint64
}

func (s *stats) refused(r refusal) { s.refusals[r].Add(1) }

// WriteMetrics writes the registry's counters in the Prometheus text
// format: the body bytes it served, by kind, and the requests it refused
// or aborted, by reason (every reason, zero included). The agent's
// /metrics handler calls it.
func (h *Handler) WriteMetrics(w io.Writer) {
	s := &h.stats
	fmt.Fprintf(w, "# HELP podmin_agent_registry_bytes_served_total Manifest and blob body bytes the node registry sent.\n"+
		"# TYPE podmin_agent_registry_bytes_served_total counter\n"+
		"podmin_agent_registry_bytes_served_total{kind=\"blob\"} %d\n"+
		"podmin_agent_registry_bytes_served_total{kind=\"manifest\"} %d\n",
		s.blobBytes.Load(), s.manifestBytes.Load())
	fmt.Fprintf(w, "# HELP podmin_agent_registry_refusals_total Requests the node registry refused or aborted, by reason.\n"+
		"# TYPE podmin_agent_registry_refusals_total counter\n")
	for r := range numRefusals {
		fmt.Fprintf(w, "podmin_agent_registry_refusals_total{reason=%q} %d\n", refusalNames[r], s.refusals[r].Load())
	}
}

// countingWriter counts the bytes written through it. It passes ReadFrom
// on, so a file range still goes out with sendfile(2).
type countingWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(uint64(n))
	return n, err
}

func (c countingWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if rf, ok := c.w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{c.w}, r)
	}
	c.n.Add(uint64(n))
	return n, err
}
