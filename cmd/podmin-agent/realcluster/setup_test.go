// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/cloud"
	awscloud "podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
)

// namespaces is the cluster's infrastructure as setup sees it: its nodes
// are this test's namespaces, which the test starts itself, so nothing is
// applied. Setup runs as on AWS otherwise: the CA secrets go to SSM
// Parameter Store (moto) and the cluster configuration, with the
// NodeGroup sizes the leader counts nodes against, to the bucket.
type namespaces struct{}

func (namespaces) Prepare(context.Context, *infra.Cluster) error { return nil }

func (namespaces) Plan(_ context.Context, cl infra.Cluster) (lifecycle.PlanSummary, error) {
	p := lifecycle.PlanSummary{}
	for _, ng := range cl.NodeGroups {
		p.Steps = append(p.Steps, fmt.Sprintf("NodeGroup %s: %d node(s), namespaces on this machine the test starts", ng.Name, ng.Size))
	}
	return p, nil
}

func (namespaces) Config(cl infra.Cluster) ([]byte, error) {
	data, err := json.MarshalIndent(lifecycle.ClusterConfig{Version: 1, Cluster: cl}, "", "  ")
	return append(data, '\n'), err
}

func (namespaces) Commit(context.Context, infra.Cluster) error { return nil }
func (namespaces) Apply(context.Context, infra.Cluster) error  { return nil }

func (namespaces) PlanDestroy(context.Context, contexts.Context) (lifecycle.PlanSummary, error) {
	return lifecycle.PlanSummary{}, errors.New("the test's namespaces are torn down by the test")
}

func (namespaces) Destroy(context.Context, contexts.Context) error {
	return errors.New("the test's namespaces are torn down by the test")
}

// connect connects the CLI to the cluster's bucket (creating it) and runs
// setup with the NodeGroups given as setup's --nodegroup values.
func (c *cluster) connect() {
	start := time.Now()
	c.mustPodmin("connect", clusterID, "--provider", "aws", "--bucket", bucket, "--region", region)
	c.setup(fmt.Sprintf("%s,size=%d", workers, len(c.allNodes())))
	c.rep.Line(fmt.Sprintf("podmin connect (aws provider, bucket %s on versitygw) and setup (CA secrets in SSM on moto, cluster configuration in the bucket) in %s",
		bucket, time.Since(start).Round(10*time.Millisecond)))
}

// setup runs podmin setup's own code (builtins.Env.Setup) for the current
// context with the namespaces infrastructure.
func (c *cluster) setup(nodegroups ...string) {
	home, _ := os.UserHomeDir()
	dirs, err := paths.Resolve(paths.Env{GOOS: runtime.GOOS, Home: home, Getenv: os.Getenv})
	must(c.t, err)
	env := &builtins.Env{Dirs: dirs, Providers: map[string]cloud.Provider{"aws": awscloud.Provider{}},
		LookupEnv: os.LookupEnv,
		Secrets: func(ctx context.Context, ctxt contexts.Context, provider string) (secrets.Store, error) {
			return awscloud.OpenSecrets(ctx, provider, awscloud.SecretsOptions{Region: ctxt.Region, Profile: ctxt.Profile})
		},
		Infrastructure: func(context.Context, lifecycle.Host, contexts.Context) (builtins.ClusterInfra, error) {
			return namespaces{}, nil
		}}
	res, err := env.Setup(context.Background(), builtins.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: nodegroups})
	if err != nil {
		c.t.Fatalf("setup: %v", err)
	}
	if !res.Applied || len(res.Secrets) != 2 {
		c.t.Fatalf("setup: %+v", res)
	}
}

// images are the sandbox image and four versions of the workload.
var images = []e2enode.Image{{Tag: "pause:e2e", Program: "pause"}, {Tag: "hello:v1", Program: "hello", Version: "v1"},
	{Tag: "hello:v2", Program: "hello", Version: "v2"}, {Tag: "hello:v3", Program: "hello", Version: "v3"},
	{Tag: "hello:v4", Program: "hello", Version: "v4"}}

// pushImages builds and pushes the images with the CLI into the bucket,
// and stores the web Pod's secret in SSM with podmin secret create.
func (c *cluster) pushImages() {
	start := time.Now()
	_, err := e2enode.PushImages(filepath.Join(c.dir, "build"), c.bin, func(args ...string) (string, error) { return c.podmin(nil, args...) }, images)
	must(c.t, err)
	if _, err := c.podmin([]byte("e2e-cluster-secret"), "secret", "create", "token", "--for", "web", "--stdin"); err != nil {
		c.t.Fatal(err)
	}
	c.rep.Line(fmt.Sprintf("images built and pushed with podmin build/push (pause:e2e, hello:v1…v4) and the web Pod's secret created in SSM in %s",
		time.Since(start).Round(10*time.Millisecond)))
}
