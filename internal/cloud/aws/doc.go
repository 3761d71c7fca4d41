// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package aws is the AWS provider: S3 for the cluster bucket (through
// objstore/s3store) and, as later features land, SSM Parameter Store,
// Secrets Manager and EC2. It honours the SDK's standard configuration
// (profiles, AWS_REGION, AWS_ENDPOINT_URL_S3, ...).
package aws
