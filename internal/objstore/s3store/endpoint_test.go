// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"podmin.dev/podmin/internal/objstore"
)

func TestChooseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, explicit, resolved string
		want                     endpointChoice
	}{
		{"aws", "", "", endpointChoice{DualStack: aws.DualStackEndpointStateEnabled}},
		{"environment", "", "http://env:9000", endpointChoice{"http://env:9000", true, aws.DualStackEndpointStateDisabled}},
		{"option", "http://opt:7070", "", endpointChoice{"http://opt:7070", true, aws.DualStackEndpointStateDisabled}},
		{"option beats environment", "http://opt:7070", "http://env:9000", endpointChoice{"http://opt:7070", true, aws.DualStackEndpointStateDisabled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseEndpoint(tc.explicit, tc.resolved); got != tc.want {
				t.Errorf("chooseEndpoint(%q, %q) = %+v, want %+v", tc.explicit, tc.resolved, got, tc.want)
			}
		})
	}
}

// urlRecorder is an HTTP client that answers every request with an empty
// 404 and remembers the URLs, so endpoint resolution is observable without
// a network.
type urlRecorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *urlRecorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return &http.Response{StatusCode: 404, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// isolateAWSConfig points the SDK at files and variables the test controls.
func isolateAWSConfig(t *testing.T, configFile string) {
	if configFile == "" {
		configFile = filepath.Join(t.TempDir(), "no-config")
	}
	t.Setenv("AWS_CONFIG_FILE", configFile)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "no-credentials"))
	for _, v := range []string{"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
		"AWS_USE_DUALSTACK_ENDPOINT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		t.Setenv(v, "") // restores the old value afterwards
		os.Unsetenv(v)  // the SDK treats a set-but-empty AWS_ENDPOINT_URL as present
	}
}

// TestNewEndpoint checks the URL the SDK actually requests for each way of
// naming (or not naming) an endpoint.
func TestNewEndpoint(t *testing.T) {
	const profileConfig = `[profile podmin]
region = eu-central-1
aws_access_key_id = AKIDPROFILE
aws_secret_access_key = secret
services = podmin-s3

[services podmin-s3]
s3 =
  endpoint_url = http://profile-s3:9000
`
	for _, tc := range []struct {
		name    string
		env     map[string]string
		config  string
		opts    Options
		wantURL string
	}{{
		name:    "aws dual-stack virtual-hosted",
		opts:    Options{Region: "eu-west-1"},
		wantURL: "https://state-bucket.s3.dualstack.eu-west-1.amazonaws.com/k",
	}, {
		name:    "AWS_ENDPOINT_URL_S3 path-style",
		env:     map[string]string{"AWS_ENDPOINT_URL_S3": "http://s3-only:9000"},
		opts:    Options{Region: "eu-west-1"},
		wantURL: "http://s3-only:9000/state-bucket/k",
	}, {
		name:    "AWS_ENDPOINT_URL path-style",
		env:     map[string]string{"AWS_ENDPOINT_URL": "http://all-services:9000"},
		opts:    Options{Region: "eu-west-1"},
		wantURL: "http://all-services:9000/state-bucket/k",
	}, {
		name:    "AWS_ENDPOINT_URL_S3 beats AWS_ENDPOINT_URL",
		env:     map[string]string{"AWS_ENDPOINT_URL": "http://all-services:9000", "AWS_ENDPOINT_URL_S3": "http://s3-only:9000"},
		opts:    Options{Region: "eu-west-1"},
		wantURL: "http://s3-only:9000/state-bucket/k",
	}, {
		name:    "option beats environment",
		env:     map[string]string{"AWS_ENDPOINT_URL_S3": "http://s3-only:9000"},
		opts:    Options{Region: "eu-west-1", Endpoint: "http://explicit:7070"},
		wantURL: "http://explicit:7070/state-bucket/k",
	}, {
		name:    "dual-stack from environment is overridden by an endpoint",
		env:     map[string]string{"AWS_USE_DUALSTACK_ENDPOINT": "true"},
		opts:    Options{Region: "eu-west-1", Endpoint: "http://explicit:7070"},
		wantURL: "http://explicit:7070/state-bucket/k",
	}, {
		name:    "profile region and service endpoint",
		config:  profileConfig,
		opts:    Options{Profile: "podmin"},
		wantURL: "http://profile-s3:9000/state-bucket/k",
	}, {
		name:    "AWS_REGION",
		env:     map[string]string{"AWS_REGION": "ap-south-1"},
		wantURL: "https://state-bucket.s3.dualstack.ap-south-1.amazonaws.com/k",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfgFile := ""
			if tc.config != "" {
				cfgFile = filepath.Join(t.TempDir(), "config")
				if err := os.WriteFile(cfgFile, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			isolateAWSConfig(t, cfgFile)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			rec := &urlRecorder{}
			opts := tc.opts
			opts.Bucket = "state-bucket"
			opts.HTTPClient = rec
			if tc.config == "" {
				opts.Credentials = credentials.NewStaticCredentialsProvider("AKID", "secret", "")
			}
			b, err := New(context.Background(), opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			// Every answer is 404: the HEAD of the object, then the HEAD
			// of the bucket that tells a missing key from a missing bucket.
			if _, err := b.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrBucketNotFound) {
				t.Fatalf("Head against the recorder: %v, want ErrBucketNotFound", err)
			}
			if len(rec.urls) == 0 || rec.urls[0] != tc.wantURL {
				t.Errorf("requested %q, want %q first", rec.urls, tc.wantURL)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	isolateAWSConfig(t, "")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no bucket", Options{Region: "eu-west-1"}, `s3store: no bucket name given: set the cluster's bucket`},
		{"no region", Options{Bucket: "b"}, `s3store: no AWS region for bucket "b": set AWS_REGION or pass a region`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.opts)
			if err == nil || err.Error() != tc.want {
				t.Errorf("New(%+v) error = %v, want %s", tc.opts, err, tc.want)
			}
		})
	}
}
