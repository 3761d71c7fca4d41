// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package s3store_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// newMultipartBucket creates a bucket whose Write uploads anything above
// 6 MiB in 5 MiB parts, so the streaming cases take the multipart path.
func newMultipartBucket(t *testing.T, srv *objstoretest.S3Server) *s3store.Bucket {
	t.Helper()
	opts := s3storetest.Options(srv, srv.BucketName(t))
	opts.MultipartThreshold = 6 << 20
	opts.PartSize = 5 << 20
	b, err := s3store.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMultipartConformance runs the streaming cases over multipart
// uploads: versitygw honours If-None-Match and If-Match on
// CompleteMultipartUpload, and a wrong body size leaves nothing behind.
func TestMultipartConformance(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	objstoretest.RunStreaming(t, func(t *testing.T) objstore.Store {
		b := newMultipartBucket(t, srv)
		t.Cleanup(func() {
			out, err := b.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(b.Name())})
			if err != nil {
				t.Errorf("ListMultipartUploads: %v", err)
				return
			}
			for _, u := range out.Uploads {
				t.Errorf("multipart upload of %s left behind", aws.ToString(u.Key))
			}
		})
		return b
	})
}

// TestMultipartRequests checks that a large write is a multipart upload
// and a small one a single PutObject, from the requests sent.
func TestMultipartRequests(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	name := srv.BucketName(t)
	log := &requestLog{}
	opts := s3storetest.Options(srv, name)
	opts.HTTPClient = log
	opts.MultipartThreshold = 6 << 20
	opts.PartSize = 5 << 20
	b, err := s3store.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	log.take()
	data := bytes.Repeat([]byte("0123456789abcdef"), (12<<20)/16)
	if _, err := b.Write(ctx, "big", iotest.HalfReader(bytes.NewReader(data)), int64(len(data)), objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(log.take(), "\n")
	if c := strings.Count(got, "PUT /"+name+"/big?partNumber="); c != 3 ||
		!strings.Contains(got, "POST /"+name+"/big?uploads") || !strings.Contains(got, "POST /"+name+"/big?uploadId=") {
		t.Errorf("requests for a 12 MiB write:\n%s\nwant create, 3 parts, complete", got)
	}
	if _, err := b.Write(ctx, "small", bytes.NewReader(data[:1<<20]), 1<<20, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 1 || got[0] != "PUT /"+name+"/small?x-id=PutObject" {
		t.Errorf("requests for a 1 MiB write = %q, want one PutObject", got)
	}
}

// blackHole accepts connections and never answers.
func blackHole(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(done)
				return
			}
			conns = append(conns, c) // held open, never read or written
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// fullBacklog listens with a backlog of one and never accepts, then fills
// the backlog, so that new connections are never established.
func fullBacklog(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue; once full, further SYNs are dropped.
	for range 4 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		t.Skip("the kernel completes connections beyond the listen backlog here")
	}
	return "http://" + addr
}

// TestBlackHoleEndpoint checks that a request to an endpoint that never
// answers fails within its deadline (per attempt; the SDK makes up to
// three), naming the endpoint: one that accepts connections and stays
// silent (response header timeout), one that never completes the TLS
// handshake, and one that never completes the TCP handshake (connect
// timeout).
func TestBlackHoleEndpoint(t *testing.T) {
	const timeout = 300 * time.Millisecond
	t.Run("response", func(t *testing.T) {
		testBlackHole(t, blackHole(t), "timeout awaiting response headers", s3store.Options{ResponseHeaderTimeout: timeout})
	})
	t.Run("TLS handshake", func(t *testing.T) {
		endpoint := "https://" + strings.TrimPrefix(blackHole(t), "http://")
		testBlackHole(t, endpoint, "TLS handshake timeout", s3store.Options{TLSHandshakeTimeout: timeout})
	})
	t.Run("connect", func(t *testing.T) {
		testBlackHole(t, fullBacklog(t), "i/o timeout", s3store.Options{ConnectTimeout: timeout})
	})
}

func testBlackHole(t *testing.T, endpoint, says string, opts s3store.Options) {
	const timeout = 300 * time.Millisecond
	opts.Bucket, opts.Region, opts.Endpoint = "state", "us-east-1", endpoint
	opts.Credentials = credentials.NewStaticCredentialsProvider("AKID", "secret", "")
	b, err := s3store.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(ctx context.Context) error{
		"Get": func(ctx context.Context) error { _, err := b.Get(ctx, "index.json", objstore.GetOptions{}); return err },
		"PutIfMatch": func(ctx context.Context) error {
			_, err := b.PutIfMatch(ctx, "index.json", []byte("{}"), `"e"`)
			return err
		},
		"Write": func(ctx context.Context) error {
			_, err := b.Write(ctx, "blob", io.LimitReader(zeros{}, 1<<20), 1<<20, objstore.PutOptions{})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := call(context.Background())
			took := time.Since(start)
			if err == nil {
				t.Fatal("request to a black hole succeeded")
			}
			// Three attempts with backoff of at most a few seconds between.
			if limit := 3*timeout + 5*time.Second; took > limit {
				t.Errorf("failed after %v, want within %v", took, limit)
			}
			msg := err.Error()
			if !strings.Contains(msg, endpoint) || !strings.Contains(msg, says) {
				t.Errorf("error %q does not name the endpoint %s and say %q", msg, endpoint, says)
			}
			if errors.Is(err, objstore.ErrNotFound) || errors.Is(err, objstore.ErrPrecondition) {
				t.Errorf("error %v wraps a sentinel; a timeout says nothing about the object", err)
			}
			t.Logf("%s failed after %v: %v", name, took.Round(time.Millisecond), err)
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestTLSStreaming runs the streaming cases over HTTPS, where a body that
// cannot seek is streamed with a trailing checksum instead of buffered,
// with the CA bundle from AWS_CA_BUNDLE applied to the timeout client.
func TestTLSStreaming(t *testing.T) {
	srv := objstoretest.StartVersityGWTLS(t)
	t.Setenv("AWS_CA_BUNDLE", srv.CAFile)
	t.Run("suite", func(t *testing.T) {
		objstoretest.RunStreaming(t, func(t *testing.T) objstore.Store { return s3storetest.NewBucket(t, srv) })
	})
	t.Run("unseekable body is streamed", func(t *testing.T) {
		pem, err := os.ReadFile(srv.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		rec := &payloadRecorder{client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
		opts := s3storetest.Options(srv, srv.BucketName(t))
		opts.HTTPClient = rec
		b, err := s3store.New(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := b.CreateBucket(ctx); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("podmin"), 1<<20)
		etag, err := b.Write(ctx, "streamed", iotest.HalfReader(bytes.NewReader(data)), int64(len(data)), objstore.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.payloads["PUT /"+b.Name()+"/streamed"]; got != "STREAMING-UNSIGNED-PAYLOAD-TRAILER" {
			t.Errorf("payload hash of the streamed PUT = %q, want STREAMING-UNSIGNED-PAYLOAD-TRAILER", got)
		}
		obj, err := b.Get(ctx, "streamed", objstore.GetOptions{})
		if err != nil || !bytes.Equal(obj.Data, data) || obj.ETag != etag {
			t.Fatalf("Get = %d bytes %s, %v; want the %d bytes written, ETag %s", len(obj.Data), obj.ETag, err, len(data), etag)
		}
		_, err = b.Write(ctx, "short", iotest.HalfReader(bytes.NewReader(data[:100])), int64(len(data)), objstore.PutOptions{})
		if !errors.Is(err, objstore.ErrSizeMismatch) {
			t.Errorf("streamed short body error = %v, want ErrSizeMismatch", err)
		}
		if _, err := b.Head(ctx, "short"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("after a short streamed body, Head error = %v, want ErrNotFound", err)
		}
	})
}

// payloadRecorder records the X-Amz-Content-Sha256 of each request.
type payloadRecorder struct {
	client   *http.Client
	mu       sync.Mutex
	payloads map[string]string
}

func (r *payloadRecorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	if r.payloads == nil {
		r.payloads = map[string]string{}
	}
	r.payloads[req.Method+" "+req.URL.Path] = req.Header.Get("X-Amz-Content-Sha256")
	r.mu.Unlock()
	return r.client.Do(req)
}
