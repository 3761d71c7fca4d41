// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"fmt"
	"net/http"
	"testing"

	"podmin.dev/podmin/builtins/deps/internal/upstreamtest"
)

// fakeUpstream is the shared recorded upstream (upstreamtest), with a
// resolver built from this package.
type fakeUpstream struct {
	*upstreamtest.Upstream
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	return &fakeUpstream{upstreamtest.New(t)}
}

func (u *fakeUpstream) resolver() *Resolver {
	return &Resolver{
		Client:       u.Server.Client(),
		GitHubAPI:    u.Server.URL + "/api",
		Hosts:        map[DownloadHost]string{KubernetesHost: u.Server.URL + "/k8s", GVisorHost: u.Server.URL + "/gvisor"},
		AgentVersion: "1.4.0",
	}
}

// content is the genuine body of a release file.
func content(name string) []byte { return upstreamtest.Body(name) }

func sum(alg string, b []byte) string { return upstreamtest.Digest(alg, b) }

type (
	httpW    = http.ResponseWriter
	httpR    = *http.Request
	httpFunc = http.HandlerFunc
)

func httpError(w http.ResponseWriter, code int) { http.Error(w, http.StatusText(code), code) }

// refusingClient fails every request: a matching manifest must not need
// the network.
func refusingClient() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("network refused in this test")
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
