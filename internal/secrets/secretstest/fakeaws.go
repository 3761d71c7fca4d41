// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// awsError is an error response of an AWS JSON 1.1 service.
type awsError struct {
	status  int
	code    string
	message string
}

func (e *awsError) Error() string { return e.code + ": " + e.message }

func errorf(code, format string, args ...any) *awsError {
	return &awsError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// fakeService is the JSON 1.1 plumbing the fakes share: one POST endpoint
// dispatching on X-Amz-Target, a request log and a clock.
type fakeService struct {
	server *httptest.Server
	prefix string // "AmazonSSM." or "secretsmanager."
	// ops run under mu with the decoded JSON body.
	ops map[string]func(body []byte) (any, *awsError)

	mu       sync.Mutex
	requests []string
	clock    time.Time
}

func (s *fakeService) start(t testing.TB) {
	s.clock = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.server.Close)
}

// now advances the fake clock one second per call, so every change has a
// distinct, deterministic time.
func (s *fakeService) now() time.Time {
	s.clock = s.clock.Add(time.Second)
	return s.clock
}

func (s *fakeService) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, s.prefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, op)
	var body []byte
	var aerr *awsError
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/":
		aerr = &awsError{status: http.StatusNotFound, code: "UnknownOperationException", message: "POST / only"}
	case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
		aerr = errorf("SerializationException", "Content-Type must be application/x-amz-json-1.1, not %q", r.Header.Get("Content-Type"))
	case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 "):
		aerr = errorf("MissingAuthenticationTokenException", "Missing Authentication Token")
	case !ok || s.ops[op] == nil:
		aerr = errorf("UnknownOperationException", "unknown operation %q", target)
	default:
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			aerr = errorf("SerializationException", "%v", err)
		}
	}
	var out any
	if aerr == nil {
		out, aerr = s.ops[op](body)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", strconv.Itoa(len(s.requests)))
	if aerr != nil {
		w.WriteHeader(aerr.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": aerr.code, "message": aerr.message})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// decode unmarshals a request body, answering SerializationException.
func decode(body []byte, v any) *awsError {
	if err := json.Unmarshal(body, v); err != nil {
		return errorf("SerializationException", "%v", err)
	}
	return nil
}

// epoch renders a time as the JSON 1.1 timestamp format (epoch seconds).
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// page returns the window of n items that token starts, and the next
// token ("" on the last page). Tokens are opaque offsets.
func page(n, size int, token string) (from, to int, next string, aerr *awsError) {
	if token != "" {
		off, err := strconv.Atoi(strings.TrimPrefix(token, "fake-token-"))
		if err != nil || off < 0 || off > n || !strings.HasPrefix(token, "fake-token-") {
			return 0, 0, "", errorf("InvalidNextToken", "The specified token is not valid.")
		}
		from = off
	}
	to = min(from+size, n)
	if to < n {
		next = "fake-token-" + strconv.Itoa(to)
	}
	return from, to, next, nil
}

// Requests returns the operations received so far, in order.
func (s *fakeService) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Count returns how many requests were received.
func (s *fakeService) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// URL is the endpoint to give the SDK as BaseEndpoint.
func (s *fakeService) URL() string { return s.server.URL }
