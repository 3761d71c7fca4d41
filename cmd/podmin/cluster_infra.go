// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/lifecycle"
	awscloud "podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/contexts"
)

// clusterInfrastructure opens the AWS infrastructure of a context: the EC2
// client for the checks, the node bootstrap (dependencies and user data)
// and the OpenTofu/Terraform runner, whose output
// streams to stderr (stdout stays the result, e.g. -o json).
func clusterInfrastructure(stderr io.Writer, lookupEnv func(string) (string, bool)) func(context.Context, lifecycle.Host, contexts.Context) (builtins.ClusterInfra, error) {
	return func(ctx context.Context, h lifecycle.Host, c contexts.Context) (builtins.ClusterInfra, error) {
		if c.Provider != "aws" {
			return nil, fmt.Errorf("provider %q has no infrastructure support in this build: use a context whose provider is aws or local", c.Provider)
		}
		load := []func(*config.LoadOptions) error{config.WithRegion(c.Region)}
		if c.Profile != "" {
			load = append(load, config.WithSharedConfigProfile(c.Profile))
		}
		cfg, err := config.LoadDefaultConfig(ctx, load...)
		if err != nil {
			return nil, fmt.Errorf("load the AWS configuration (profile %q): %w", c.Profile, err)
		}
		client := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			o.EndpointOptions.UseDualStackEndpoint = awscloud.DualStack(o.BaseEndpoint)
		})
		return &lifecycle.AWSInfra{
			Host:    h,
			Context: c,
			EC2:     client,
			// The node bootstrap publishes the dependencies through h,
			// so a dry run publishes only into its overlay.
			Bootstrap: &lifecycle.AWSBootstrap{Host: h, EC2: client},
			Runner: &infra.Runner{
				Bucket: c.Bucket, Region: c.Region, Profile: c.Profile,
				CacheDir:  h.CacheDir(),
				LookupEnv: lookupEnv,
				Environ:   os.Environ(),
				Output:    stderr,
				Progress:  h.Progress,
			},
		}, nil
	}
}
