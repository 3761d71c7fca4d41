// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package aws_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// isolate points the SDK at files and variables the test controls.
func isolate(t *testing.T, config string) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	for _, v := range []string{"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_SSM", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_EC2_METADATA_DISABLED"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestOpenSecretsHonoursEndpointVariables(t *testing.T) {
	isolate(t, "")
	ssmFake := secretstest.NewFakeSSM(t)
	smFake := secretstest.NewFakeSecretsManager(t)
	t.Setenv("AWS_ENDPOINT_URL_SSM", ssmFake.URL())
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", smFake.URL())
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	n, _ := secrets.PodSecret("demo", "default", "web", "k")
	for _, tc := range []struct {
		provider string
		requests func() []string
	}{
		{secrets.ParameterStore, ssmFake.Requests},
		{secrets.SecretsManager, smFake.Requests},
	} {
		s, err := aws.OpenSecrets(t.Context(), tc.provider, aws.SecretsOptions{Region: "eu-west-1"})
		if err != nil {
			t.Fatal(err)
		}
		if s.Provider() != tc.provider {
			t.Errorf("Provider() = %q, want %q", s.Provider(), tc.provider)
		}
		if err := s.Create(t.Context(), n, secrets.Value("v")); err != nil {
			t.Fatalf("%s Create: %v", tc.provider, err)
		}
		if got := tc.requests(); len(got) != 1 {
			t.Errorf("%s fake saw %q, want one request", tc.provider, got)
		}
	}
}

func TestOpenSecretsUsesProfile(t *testing.T) {
	ssmFake := secretstest.NewFakeSSM(t)
	isolate(t, `[profile podmin]
region = ap-southeast-2
aws_access_key_id = AKIDPROFILE
aws_secret_access_key = profile-secret
endpoint_url = `+ssmFake.URL()+"\n")
	s, err := aws.OpenSecrets(t.Context(), secrets.ParameterStore, aws.SecretsOptions{Profile: "podmin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(t.Context(), "demo", secrets.Filter{}); err != nil {
		t.Fatalf("List through the profile: %v", err)
	}
	if got := ssmFake.Requests(); !slices.Equal(got, []string{"GetParametersByPath"}) {
		t.Errorf("requests = %q", got)
	}
}

func TestOpenSecretsErrors(t *testing.T) {
	isolate(t, "")
	if _, err := aws.OpenSecrets(t.Context(), "local", aws.SecretsOptions{Region: "us-east-1"}); err == nil || !strings.Contains(err.Error(), `unknown AWS secrets provider "local"`) {
		t.Errorf("OpenSecrets(local) = %v", err)
	}
	if _, err := aws.OpenSecrets(t.Context(), secrets.SecretsManager, aws.SecretsOptions{}); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("OpenSecrets(no region) = %v", err)
	}
}

// hostRecorder answers no request and records the host each one was sent
// to.
type hostRecorder struct{ hosts []string }

func (h *hostRecorder) Do(r *http.Request) (*http.Response, error) {
	h.hosts = append(h.hosts, r.URL.Host)
	return nil, errors.New("recorded")
}

// IPv6-only nodes without NAT64 reach AWS's APIs only on their dual-stack
// endpoints (for Secrets Manager in the aws partition that is its usual
// name, which serves IPv6 too); a custom endpoint (an emulator, a proxy)
// turns dual-stack off, since the SDK refuses both.
func TestSecretsClientsAreDualStackUnlessCustom(t *testing.T) {
	isolate(t, "")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	ctx := t.Context()
	region := "us-west-2"
	ssmDual, err := ssm.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, ssm.EndpointParameters{Region: &region, UseDualStack: awssdk.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	smDual, err := sm.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, sm.EndpointParameters{Region: &region, UseDualStack: awssdk.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := secrets.PodSecret("demo", "default", "web", "k")
	for _, tc := range []struct {
		provider, env, host string
		dual                func(rec *hostRecorder) (awssdk.DualStackEndpointState, error)
	}{
		{secrets.ParameterStore, "AWS_ENDPOINT_URL_SSM", ssmDual.URI.Host, func(rec *hostRecorder) (awssdk.DualStackEndpointState, error) {
			c, err := aws.NewSSM(ctx, aws.SecretsOptions{Region: region, HTTPClient: rec})
			if err != nil {
				return 0, err
			}
			return c.Options().EndpointOptions.UseDualStackEndpoint, nil
		}},
		{secrets.SecretsManager, "AWS_ENDPOINT_URL_SECRETS_MANAGER", smDual.URI.Host, func(rec *hostRecorder) (awssdk.DualStackEndpointState, error) {
			c, err := aws.NewSecretsManager(ctx, aws.SecretsOptions{Region: region, HTTPClient: rec})
			if err != nil {
				return 0, err
			}
			return c.Options().EndpointOptions.UseDualStackEndpoint, nil
		}},
	} {
		rec := &hostRecorder{}
		if got, err := tc.dual(rec); err != nil || got != awssdk.DualStackEndpointStateEnabled {
			t.Errorf("%s client: dual-stack %v (%v), want enabled", tc.provider, got, err)
		}
		s, err := aws.OpenSecrets(ctx, tc.provider, aws.SecretsOptions{Region: region, HTTPClient: rec})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = s.Read(ctx, n)
		if len(rec.hosts) == 0 || rec.hosts[0] != tc.host {
			t.Errorf("%s: requests went to %q, want the dual-stack endpoint %s", tc.provider, rec.hosts, tc.host)
		}
		t.Setenv(tc.env, "http://127.0.0.1:1")
		rec = &hostRecorder{}
		if got, err := tc.dual(rec); err != nil || got != awssdk.DualStackEndpointStateDisabled {
			t.Errorf("%s client with a custom endpoint: dual-stack %v (%v), want disabled", tc.provider, got, err)
		}
		if s, err = aws.OpenSecrets(ctx, tc.provider, aws.SecretsOptions{Region: region, HTTPClient: rec}); err != nil {
			t.Fatalf("%s with a custom endpoint: %v", tc.provider, err)
		}
		_, _ = s.Read(ctx, n)
		if len(rec.hosts) == 0 || rec.hosts[0] != "127.0.0.1:1" {
			t.Errorf("%s: requests went to %q, want the custom endpoint", tc.provider, rec.hosts)
		}
	}
}
