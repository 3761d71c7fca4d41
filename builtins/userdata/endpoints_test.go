// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/deps"
)

// The node script's endpoints follow the standard variables as the AWS CLI
// and SDKs do, so a test can point a node at another S3, EC2 and instance
// metadata service: the service's own variable first, then
// AWS_ENDPOINT_URL, neither when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true,
// else the dual-stack endpoints. The lines run are the rendered script's
// own, from the dual-stack export to the metadata base.
func TestScriptHonoursEndpointVariables(t *testing.T) {
	r, err := RenderNode(node(t, deps.ARM64))
	if err != nil {
		t.Fatal(err)
	}
	script := string(r.Script)
	start := strings.Index(script, "export AWS_USE_DUALSTACK_ENDPOINT=true")
	end := strings.Index(script, "imds_base=")
	if start < 0 || end < start {
		t.Fatal("the script sets no endpoints before its metadata base")
	}
	end += strings.Index(script[end:], "\n")
	block := "region=eu-west-1\n" + script[start:end] + "\nprintf '%s|%s|%s' \"$s3_endpoint\" \"$ec2_endpoint\" \"$imds_base\"\n"
	const (
		s3  = "https://s3.dualstack.eu-west-1.amazonaws.com"
		ec2 = "https://ec2.eu-west-1.api.aws"
		md  = "http://[fd00:ec2::254]/latest"
	)
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"none", nil, s3 + "|" + ec2 + "|" + md},
		{"global", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:5000"}, "http://127.0.0.1:5000|http://127.0.0.1:5000|" + md},
		{"per service first", []string{"AWS_ENDPOINT_URL=http://g", "AWS_ENDPOINT_URL_S3=http://s3.test", "AWS_ENDPOINT_URL_EC2=http://ec2.test"},
			"http://s3.test|http://ec2.test|" + md},
		{"one service", []string{"AWS_ENDPOINT_URL_EC2=http://ec2.test"}, s3 + "|http://ec2.test|" + md},
		{"ignored", []string{"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true", "AWS_ENDPOINT_URL=http://g", "AWS_ENDPOINT_URL_S3=http://s3.test"},
			s3 + "|" + ec2 + "|" + md},
		{"metadata", []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1338/"}, s3 + "|" + ec2 + "|http://127.0.0.1:1338/latest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
			// Only the case's variables: none of this machine's.
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tc.want {
				t.Fatalf("got %q (%v), want %q", out, err, tc.want)
			}
		})
	}
}
