// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command hello is the workload of the real-node end-to-end test: a static
// HTTP server built into a FROM-scratch image. It answers on :8080 in plain
// HTTP and on :8443 with the Pod's workload identity, and reports what a
// test cannot see from outside the container:
//
//	GET /            {"version", "pod", "kernel"}: the kernel line is the
//	                 sandbox's (gVisor reports its own), not the host's
//	GET /healthz     ok
//	GET /read?path=P the bytes of P, for P beneath the workload identity
//	                 or the secret mounts only
//	GET /fetch?url=U[&timeout=D][&servername=N]
//	                 GET U from inside the Pod within D (default 2s),
//	                 trusting the mounted workload CA (and verifying the
//	                 server as N, for a URL that names an address);
//	                 answers {"status", "body"} or 502
//
// On SIGTERM it does what real servers do: it stops accepting connections,
// closes idle keep-alive connections, lets the requests in flight finish
// (for at most drainLimit) and exits; an idle server exits at once.
// HELLO_VERSION names the version it reports. Run as "hello exit N" it
// serves nothing and exits at once with status N: the command of the
// test's broken image.
package main
