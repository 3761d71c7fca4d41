// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package mototest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Region is the region every test uses; moto serves any.
const Region = "us-west-2"

// Account is moto's default account ID.
const Account = "123456789012"

// AMIs are the Debian 13 images launcher.py registers, per architecture.
var AMIs = map[string]string{"amd64": "ami-0d0b13a1f0a0d0e01", "arm64": "ami-0d0b13a1f0a0d0e02"}

// Server is a running moto server.
type Server struct {
	// URL is its endpoint: every service answers there.
	URL string
	log *logBuffer
}

// launcher is launcher.py's path, found beside this file.
func launcher() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "launcher.py")
}

// Available reports why moto cannot run here, or "" when it can.
func Available() string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "python3 is not installed: the moto tier needs Python 3 with moto 5.2 (pip install 'moto[server]==5.2.1')"
	}
	if _, err := exec.LookPath("moto_server"); err != nil {
		return "moto_server is not installed: the moto tier needs moto 5.2 with its server (pip install 'moto[server]==5.2.1')"
	}
	out, err := exec.Command(py, "-c", "import moto.server; print(moto.__version__)").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("python3 cannot import moto.server (%v): install moto 5.2 with its server (pip install 'moto[server]==5.2.1')", strings.TrimSpace(string(out)))
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, "5.2.") {
		return fmt.Sprintf("moto %s is installed; launcher.py's patches are written for moto 5.2 (pip install 'moto[server]==5.2.1')", v)
	}
	return ""
}

// Start runs the launcher on a free loopback port and waits until moto
// answers; it stops when the test ends. Without moto the test is skipped
// with the reason.
func Start(t testing.TB) *Server {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), log: &logBuffer{}}
	cmd := exec.Command("python3", launcher(), fmt.Sprint(port), filepath.Join(dir, "amis.json"))
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("moto server log (last 4 KiB):\n%s", s.tail(4096))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("moto launcher exited (%v):\n%s", err, s.tail(4096))
		default:
		}
		resp, err := http.Get(s.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("moto did not answer on %s within 60 s:\n%s", s.URL, s.tail(4096))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) tail(n int) string {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	b := s.log.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Env is the environment that points the AWS CLI, the SDKs and Terraform's
// AWS provider and S3 backend at s, with moto's dummy credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL=" + s.URL, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_REGION=" + Region, "AWS_DEFAULT_REGION=" + Region, "AWS_EC2_METADATA_DISABLED=true"}
}

// Query calls an AWS Query API action (EC2, IAM, Auto Scaling) on s and
// returns the XML response. moto does not check signatures: the
// credential scope only names the service.
func (s *Server) Query(ctx context.Context, service, action string, params map[string]string) (string, error) {
	form := url.Values{"Action": {action}, "Version": {apiVersions[service]}}
	for k, v := range params {
		form.Set(k, v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=testing/20260101/%s/%s/aws4_request, SignedHeaders=host, Signature=0", Region, service))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s: %s", service, action, resp.Status, body)
	}
	return string(body), nil
}

var apiVersions = map[string]string{"ec2": "2016-11-15", "iam": "2010-05-08", "autoscaling": "2011-01-01"}

// Values returns the text of every <tag>…</tag> in an XML response.
func Values(xml, tag string) []string {
	re := regexp.MustCompile("<" + regexp.QuoteMeta(tag) + ">([^<]*)</" + regexp.QuoteMeta(tag) + ">")
	var out []string
	for _, m := range re.FindAllStringSubmatch(xml, -1) {
		out = append(out, m[1])
	}
	return out
}

// Leftovers lists what of cluster's is still in s: EC2 resources tagged
// podmin:cluster=cluster (terminated instances aside), Auto Scaling Groups
// and IAM roles, instance profiles and policies named podmin-<cluster>-.
// Each resource type is described by its own call (moto's DescribeTags
// keeps the tags of deleted resources). An error is never an empty list.
func (s *Server) Leftovers(ctx context.Context, cluster string) ([]string, error) {
	var out []string
	filter := map[string]string{"Filter.1.Name": "tag:podmin:cluster", "Filter.1.Value.1": cluster}
	for _, q := range []struct{ action, id string }{
		{"DescribeVpcs", "vpcId"},
		{"DescribeSubnets", "subnetId"},
		{"DescribeSecurityGroups", "groupId"},
		{"DescribeRouteTables", "routeTableId"},
		{"DescribeInternetGateways", "internetGatewayId"},
		{"DescribeEgressOnlyInternetGateways", "egressOnlyInternetGatewayId"},
		{"DescribeNetworkInterfaces", "networkInterfaceId"},
		{"DescribeAddresses", "allocationId"},
		{"DescribeLaunchTemplates", "launchTemplateId"},
		{"DescribeVpcEndpoints", "vpcEndpointId"},
		{"DescribeVolumes", "volumeId"},
	} {
		params := filter
		if q.action == "DescribeVpcEndpoints" {
			// AWS, and moto, keep listing a deleted endpoint for a
			// while, in state "deleted".
			params = map[string]string{"Filter.2.Name": "vpc-endpoint-state"}
			for i, st := range []string{"pendingAcceptance", "pending", "available", "deleting", "rejected", "failed", "expired"} {
				params[fmt.Sprintf("Filter.2.Value.%d", i+1)] = st
			}
			maps.Copy(params, filter)
		}
		body, err := s.Query(ctx, "ec2", q.action, params)
		if err != nil {
			return nil, err
		}
		for _, id := range uniq(Values(body, q.id)) {
			out = append(out, q.id+" "+id)
		}
	}
	body, err := s.Query(ctx, "ec2", "DescribeInstances", map[string]string{"Filter.1.Name": "tag:podmin:cluster", "Filter.1.Value.1": cluster,
		"Filter.2.Name": "instance-state-name", "Filter.2.Value.1": "pending", "Filter.2.Value.2": "running", "Filter.2.Value.3": "stopping", "Filter.2.Value.4": "stopped"})
	if err != nil {
		return nil, err
	}
	for _, id := range uniq(Values(body, "instanceId")) {
		out = append(out, "instanceId "+id)
	}
	prefix := "podmin-" + cluster + "-"
	for _, q := range []struct{ service, action, tag string }{
		{"autoscaling", "DescribeAutoScalingGroups", "AutoScalingGroupName"},
		{"iam", "ListRoles", "RoleName"},
		{"iam", "ListInstanceProfiles", "InstanceProfileName"},
	} {
		body, err := s.Query(ctx, q.service, q.action, nil)
		if err != nil {
			return nil, err
		}
		for _, n := range Values(body, q.tag) {
			if strings.HasPrefix(n, prefix) {
				out = append(out, q.tag+" "+n)
			}
		}
	}
	body, err = s.Query(ctx, "iam", "ListPolicies", map[string]string{"Scope": "Local"})
	if err != nil {
		return nil, err
	}
	for _, n := range Values(body, "PolicyName") {
		if strings.HasPrefix(n, prefix) {
			out = append(out, "PolicyName "+n)
		}
	}
	return out, nil
}

// uniq drops repeated IDs: a response may name a resource in several
// places (an ENI's attachment, a route table's associations).
func uniq(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// logBuffer keeps the launcher's stdout and stderr, written while tests
// read them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// JSON calls an action of an AWS JSON-protocol service (ssm,
// secretsmanager) on s: target is "<prefix>.<Action>", for example
// "AmazonSSM.PutParameter". It returns the response body.
func (s *Server) JSON(ctx context.Context, service, target string, body any) ([]byte, error) {
	in, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/", bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=testing/20260101/%s/%s/aws4_request, SignedHeaders=host, Signature=0", Region, service))
	return s.do(req, target)
}

// S3 sends an S3 REST request for path ("/bucket" or "/bucket/key") and
// returns the status code; a transport error is an error, a status is not.
func (s *Server) S3(ctx context.Context, method, path string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=testing/20260101/%s/s3/aws4_request, SignedHeaders=host, Signature=0", Region))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// CreateBucket makes bucket in Region, as a user would before connecting.
func (s *Server) CreateBucket(ctx context.Context, bucket string) error {
	conf := `<CreateBucketConfiguration><LocationConstraint>` + Region + `</LocationConstraint></CreateBucketConfiguration>`
	code, err := s.S3(ctx, http.MethodPut, "/"+bucket, []byte(conf))
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("create bucket %s: HTTP %d", bucket, code)
	}
	return err
}

// Parameters lists the Parameter Store names beginning with prefix.
func (s *Server) Parameters(ctx context.Context, prefix string) ([]string, error) {
	body, err := s.JSON(ctx, "ssm", "AmazonSSM.DescribeParameters", map[string]any{"MaxResults": 50})
	if err != nil {
		return nil, err
	}
	var out struct {
		Parameters []struct{ Name string }
		NextToken  string
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	if out.NextToken != "" {
		return nil, errors.New("DescribeParameters: more than one page of parameters")
	}
	var names []string
	for _, p := range out.Parameters {
		if strings.HasPrefix(p.Name, prefix) {
			names = append(names, p.Name)
		}
	}
	return names, nil
}

func (s *Server) do(req *http.Request, what string) ([]byte, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", what, resp.Status, b)
	}
	return b, nil
}
