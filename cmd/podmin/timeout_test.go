// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/contexts"
)

// blackHole accepts TCP connections and never answers, like an endpoint
// behind a firewall that drops replies.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// useAWSContext saves and selects an AWS context for bucket without
// contacting it.
func (c *cli) useAWSContext(bucket string) {
	c.t.Helper()
	err := contexts.Update(c.env["XDG_CONFIG_HOME"]+"/podmin", func(f *contexts.File) error {
		f.Contexts["demo"] = contexts.Context{Cluster: "demo", Provider: "aws", Region: "us-east-1", Bucket: bucket, SecretsProvider: "aws-parameter-store"}
		f.Current = "demo"
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// awsTestEnv points the AWS SDK at fakes only: fake credentials, no config
// files, no instance metadata, and S3 at endpoint unless it is empty.
func awsTestEnv(t *testing.T, endpoint string) {
	if endpoint != "" {
		t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFAKE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// A command against an endpoint that never answers fails within its
// --timeout and names the request and the endpoint.
func TestBlackHoleEndpointTimesOut(t *testing.T) {
	endpoint := blackHole(t)
	awsTestEnv(t, endpoint)
	c := newCLI(t)
	c.useAWSContext("black-hole-bucket")
	for _, args := range [][]string{
		{"list"},
		{"delete", "web", "-g", "workers", "--yes"},
		{"deploy", "web", "-g", "workers", "--image", "registry.podmin.internal/apps/hello:v1"},
		{"preview", "-g", "workers"},
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			_, errs, code := c.run(append(args, "--timeout", "1500ms")...)
			took := time.Since(start)
			t.Logf("%v: %s", took, errs)
			if code != exitDeadline {
				t.Fatalf("exit %d, want %d\n%s", code, exitDeadline, errs)
			}
			if took < 1500*time.Millisecond || took > 5*time.Second {
				t.Errorf("took %v with --timeout 1.5s", took)
			}
			for _, want := range []string{"GET deployments/index.json of bucket black-hole-bucket", "against " + endpoint, "did not finish within --timeout 1.5s", "raise --timeout"} {
				if !strings.Contains(errs, want) {
					t.Errorf("error lacks %q:\n%s", want, errs)
				}
			}
		})
	}
}

func TestTimeoutFlag(t *testing.T) {
	c := newCLI(t)
	c.fails(2, "--timeout -1s: use a positive duration", "list", "--timeout", "-1s")
	out := c.ok("--help")
	if !strings.Contains(out, "--timeout duration") || !strings.Contains(out, "(default 10m0s)") {
		t.Errorf("--help does not document --timeout:\n%s", out)
	}
}
