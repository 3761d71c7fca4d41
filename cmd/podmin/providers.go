// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"path/filepath"

	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
)

// providers lists the providers this binary offers.
func providers(dirs paths.Dirs) map[string]cloud.Provider {
	return map[string]cloud.Provider{
		"aws":   aws.Provider{},
		"local": local.New(dirs.Data),
	}
}

// secretStores opens the secrets providers this binary offers. The AWS
// stores use the context's region and profile only for AWS clusters; a
// local cluster reading AWS secrets uses the SDK's own configuration.
func secretStores(dirs paths.Dirs) func(context.Context, contexts.Context, string) (secrets.Store, error) {
	return func(ctx context.Context, c contexts.Context, provider string) (secrets.Store, error) {
		if provider == secrets.Local {
			return localsecrets.New(filepath.Join(dirs.Data, "secrets")), nil
		}
		var opts aws.SecretsOptions
		if c.Provider == "aws" {
			opts = aws.SecretsOptions{Region: c.Region, Profile: c.Profile}
		}
		return aws.OpenSecrets(ctx, provider, opts)
	}
}
