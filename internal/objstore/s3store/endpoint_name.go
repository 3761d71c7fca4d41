// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import "github.com/aws/aws-sdk-go-v2/aws"

// Endpoint names the endpoint the bucket's requests go to, for messages:
// the custom endpoint when one is in effect, otherwise AWS's regional
// dual-stack endpoint.
func (b *Bucket) Endpoint() string {
	if ep := aws.ToString(b.client.Options().BaseEndpoint); ep != "" {
		return ep
	}
	return "https://s3.dualstack." + b.region + ".amazonaws.com"
}
