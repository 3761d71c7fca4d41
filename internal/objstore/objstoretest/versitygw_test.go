// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package objstoretest_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"podmin.dev/podmin/internal/objstore/objstoretest"
)

func TestStartVersityGW(t *testing.T) {
	var srv *objstoretest.S3Server
	t.Run("serve", func(t *testing.T) {
		srv = objstoretest.StartVersityGW(t)
		if srv.Region != "us-east-1" || srv.AccessKey == "" || srv.SecretKey == "" {
			t.Errorf("server = %+v, want us-east-1 and root keys", srv)
		}
		// An unsigned request is refused in S3's own words.
		resp, err := http.Get(srv.Endpoint + "/")
		if err != nil {
			t.Fatalf("GET %s: %v", srv.Endpoint, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>AccessDenied</Code>") {
			t.Errorf("unsigned GET / = %d %s, want 403 AccessDenied", resp.StatusCode, body)
		}
		if err := syscall.Setxattr(filepath.Join(srv.Dir), "user.podmin.check", []byte("1"), 0); err != nil {
			t.Errorf("posix root %s takes no user xattrs: %v", srv.Dir, err)
		}
	})
	// The subtest's cleanup has stopped the server.
	addr := strings.TrimPrefix(srv.Endpoint, "http://")
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Errorf("versitygw still listening on %s after its test ended", addr)
	}
}

func TestS3ServerBucketName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	srv := &objstoretest.S3Server{}
	seen := map[string]bool{}
	for _, name := range []string{"x", "A_Very/Long Test Name With Ünïcode And/Sub/Tests/That Goes On And On", "--", "UPPER"} {
		t.Run(name, func(t *testing.T) {
			for range 2 {
				b := srv.BucketName(t)
				if !valid.MatchString(b) || strings.Contains(b, "--") {
					t.Errorf("BucketName = %q, not a valid S3 bucket name", b)
				}
				if seen[b] {
					t.Errorf("BucketName = %q twice", b)
				}
				seen[b] = true
			}
		})
	}
}

// fatalTB records Fatalf instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestVersityGWBinaryFromEnv(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "versitygw")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := filepath.Join(dir, "plain")
	if err := os.WriteFile(notExe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ env, wantPath, wantFatal string }{
		{env: exe, wantPath: exe},
		{env: notExe, wantFatal: fmt.Sprintf(`PODMIN_VERSITYGW=%q is not an executable file (<nil>): unset it to build versitygw from tools/go.mod`, notExe)},
		{env: filepath.Join(dir, "missing"), wantFatal: fmt.Sprintf(`PODMIN_VERSITYGW=%q is not an executable file (stat %s: no such file or directory): unset it to build versitygw from tools/go.mod`,
			filepath.Join(dir, "missing"), filepath.Join(dir, "missing"))},
	} {
		t.Setenv(objstoretest.VersityGWEnv, tc.env)
		f := &fatalTB{TB: t}
		got := objstoretest.VersityGWBinary(f)
		if f.msg != tc.wantFatal {
			t.Errorf("VersityGWBinary with %s: Fatalf(%q), want %q", tc.env, f.msg, tc.wantFatal)
		}
		if tc.wantFatal == "" && got != tc.wantPath {
			t.Errorf("VersityGWBinary = %q, want %q", got, tc.wantPath)
		}
	}
}
