// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store_test

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// The answers below are ones versitygw cannot give: buckets of other
// accounts, regions other than its own, legacy location names.

func TestCreateBucketOutsideUSEast1SendsLocationConstraint(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	if err := f.bucket(t, "eu-central-1").CreateBucket(context.Background()); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if got := f.requests(); !slices.Equal(got, []string{"PUT /state"}) {
		t.Fatalf("requests = %q, want one PUT /state", got)
	}
	if body := f.body(0); !strings.Contains(body, "<LocationConstraint>eu-central-1</LocationConstraint>") {
		t.Errorf("CreateBucket body = %s, want the eu-central-1 LocationConstraint", body)
	}
}

func TestCreateBucketExists(t *testing.T) {
	for _, tc := range []struct {
		name, region, code string
		headStatus         int
		wantRequests       []string
		want               string
	}{{
		name: "taken by another account", region: "eu-west-1", code: "BucketAlreadyExists",
		wantRequests: []string{"PUT /state"},
		want:         `s3 create-bucket "state": bucket already exists: the name is taken by another account: bucket names are global, choose another name`,
	}, {
		name: "already ours", region: "eu-west-1", code: "BucketAlreadyOwnedByYou",
		wantRequests: []string{"PUT /state"},
		want:         `s3 create-bucket "state": bucket already exists (owned by these credentials)`,
	}, {
		// us-east-1 answers 200 to re-creating one's own bucket; the
		// HeadBucket before it is what notices.
		name: "already ours in us-east-1", region: "us-east-1", code: "",
		wantRequests: []string{"HEAD /state"},
		want:         `s3 create-bucket "state": bucket already exists (owned by these credentials)`,
	}, {
		// In us-east-1 another account's bucket answers HeadBucket with
		// 403; CreateBucket then says whose it is.
		name: "taken in us-east-1", region: "us-east-1", code: "BucketAlreadyExists", headStatus: 403,
		wantRequests: []string{"HEAD /state", "PUT /state"},
		want:         `s3 create-bucket "state": bucket already exists: the name is taken by another account: bucket names are global, choose another name`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					w.WriteHeader(cmp.Or(tc.headStatus, 200))
					return
				}
				s3Error(w, 409, tc.code)
			})
			err := f.bucket(t, tc.region).CreateBucket(context.Background())
			if !errors.Is(err, objstore.ErrBucketExists) || err.Error() != tc.want {
				t.Errorf("CreateBucket error = %v\nwant ErrBucketExists: %s", err, tc.want)
			}
			if got := f.requests(); !slices.Equal(got, tc.wantRequests) {
				t.Errorf("requests = %q, want %q", got, tc.wantRequests)
			}
		})
	}
}

func TestBucketExistsAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		header  string
		want    bool
		wantErr string
	}{
		{name: "exists", status: 200, want: true},
		{name: "missing", status: 404, want: false},
		{name: "another account's", status: 403,
			wantErr: `s3 head-bucket "state": access denied: the bucket belongs to another account or the credentials may not use it: choose another name or fix the IAM policy`},
		{name: "another region", status: 301, header: "ap-south-1",
			wantErr: `s3 head-bucket "state": the bucket is in region "ap-south-1", not eu-west-1: use that region`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("X-Amz-Bucket-Region", tc.header)
				}
				w.WriteHeader(tc.status)
			})
			got, err := f.bucket(t, "eu-west-1").BucketExists(context.Background())
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Errorf("BucketExists = %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr+": ") {
				t.Errorf("BucketExists error = %v\nwant prefix %s", err, tc.wantErr)
			}
		})
	}
}

func TestBucketRegionFallsBackToLocation(t *testing.T) {
	for _, tc := range []struct{ constraint, want string }{
		{"", "us-east-1"}, {"EU", "eu-west-1"}, {"ap-south-1", "ap-south-1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					w.WriteHeader(200) // no x-amz-bucket-region
					return
				}
				w.Header().Set("Content-Type", "application/xml")
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
					tc.constraint + `</LocationConstraint>`))
			})
			got, err := f.bucket(t, "eu-west-1").BucketRegion(context.Background())
			if err != nil || got != tc.want {
				t.Errorf("BucketRegion = %q, %v; want %q", got, err, tc.want)
			}
			if reqs := f.requests(); !slices.Equal(reqs, []string{"HEAD /state", "GET /state"}) {
				t.Errorf("requests = %q, want HEAD then GET ?location", reqs)
			}
		})
	}
}
