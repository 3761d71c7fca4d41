// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// NodeBootstrap renders what the nodes boot with: each NodeGroup's
// launch-template user data (base64) and, for NAT64, the mirrored Jool
// archive of an architecture. The node bootstrap provides it
// (AWSBootstrap).
type NodeBootstrap interface {
	// Stage resolves the nodes' dependencies for cl, whose architectures
	// boot the pinned amis (architecture → AMI ID), without writing the
	// bucket. It runs once, before the plan, UserData and JoolArchive.
	Stage(ctx context.Context, cl infra.Cluster, amis map[string]string) error
	// Publish publishes what Stage resolved once the plan is confirmed;
	// UserData and JoolArchive render the same from either.
	Publish(ctx context.Context, cl infra.Cluster) error
	UserData(ctx context.Context, cl infra.Cluster, ng infra.NodeGroup) (string, error)
	JoolArchive(ctx context.Context, cl infra.Cluster, arch, ami string) (infra.JoolArchive, error)
}

// AWSInfra is the AWS compute and networking: the embedded module,
// rendered under <cache>/infrastructure/<cluster>, run by OpenTofu/
// Terraform, after the EC2 API checked every input.
type AWSInfra struct {
	// Host is the operation's face (a dry run's own): it opens the
	// bucket and names the cache.
	Host BootstrapHost
	// Context is the cluster's context.
	Context contexts.Context
	// EC2 answers the checks before anything runs.
	EC2 infra.EC2API
	// Runner runs OpenTofu/Terraform; its Dir is set here.
	Runner *infra.Runner
	// Bootstrap renders the nodes' user data; nil refuses setup.
	Bootstrap NodeBootstrap
	// AccountID pins the provider to an account when set.
	AccountID string
	// Now stamps the launch generation; nil means time.Now.
	Now func() time.Time

	vpc  infra.VPCChoice
	amis map[string]string
	vars *infra.Vars
	// prev is what the last setup published (zero before the first):
	// its create nonce and subnet allocation are kept.
	prev infra.Vars
}

var _ Infra = (*AWSInfra)(nil)

func (a *AWSInfra) dir() string { return infra.ModuleDir(a.Host.CacheDir(), a.Context.Cluster) }

// runner returns the runner for the module directory and the cluster's
// backend.
func (a *AWSInfra) runner() infra.Runner {
	r := *a.Runner
	r.Dir = a.dir()
	r.Bucket, r.Region, r.Profile = a.Context.Bucket, a.Context.Region, a.Context.Profile
	return r
}

// Prepare implements Infra: zones, instance types, AMIs and the VPC
// are checked through the EC2 API before anything is written or run.
func (a *AWSInfra) Prepare(ctx context.Context, cl *infra.Cluster) error {
	if err := infra.ResolveZones(ctx, a.EC2, cl); err != nil {
		return err
	}
	if err := infra.ResolveInstanceTypes(ctx, a.EC2, cl); err != nil {
		return err
	}
	amis, err := infra.ResolveAMIs(ctx, a.EC2, *cl)
	if err != nil {
		return err
	}
	if a.prev, _, err = a.storedVars(ctx, a.Context); err != nil {
		return err
	}
	vpc, err := infra.SelectVPC(ctx, a.EC2, *cl, a.prev)
	if err != nil {
		return err
	}
	a.amis, a.vpc = amis, vpc
	if a.Bootstrap == nil {
		return errors.New("this build cannot render node user data (the node bootstrap is missing): AWS setup is not available")
	}
	return nil
}

// Plan implements Infra: it renders the module and plans.
func (a *AWSInfra) Plan(ctx context.Context, cl infra.Cluster) (PlanSummary, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	in := infra.Inputs{AccountID: a.AccountID, AMIs: a.amis, LaunchGeneration: now().UTC().Format("20060102T150405Z"),
		UserData: map[string]string{}, JoolArchives: map[string]infra.JoolArchive{}, CreateNonce: a.prev.CreateNonce,
		Previous: a.prev}
	if in.CreateNonce == "" {
		// The first setup draws the nonce before anything is created;
		// Config publishes it with the variables before apply.
		in.CreateNonce = contexts.NewNonce()
	}
	if a.vpc.Reuse {
		in.ExistingVPCID = a.vpc.ID
	}
	if err := a.Bootstrap.Stage(ctx, cl, a.amis); err != nil {
		return PlanSummary{}, err
	}
	for _, ng := range cl.NodeGroups {
		ud, err := a.Bootstrap.UserData(ctx, cl, ng)
		if err != nil {
			return PlanSummary{}, fmt.Errorf("render the user data of NodeGroup %s: %w", ng.Name, err)
		}
		in.UserData[ng.Name] = ud
	}
	for _, arch := range cl.NAT64Arch {
		if _, ok := in.JoolArchives[arch]; ok {
			continue
		}
		j, err := a.Bootstrap.JoolArchive(ctx, cl, arch, a.amis[arch])
		if err != nil {
			return PlanSummary{}, fmt.Errorf("mirror the Jool archive for %s: %w", arch, err)
		}
		in.JoolArchives[arch] = j
	}
	v, err := infra.BuildVars(cl, in)
	if err != nil {
		return PlanSummary{}, err
	}
	a.vars = &v
	return a.plan(ctx, v, false)
}

func (a *AWSInfra) plan(ctx context.Context, v infra.Vars, destroy bool) (PlanSummary, error) {
	if _, err := infra.Write(a.dir(), v); err != nil {
		return PlanSummary{}, fmt.Errorf("write the OpenTofu/Terraform module: %w", err)
	}
	r := a.runner()
	if err := r.CheckVersion(ctx); err != nil {
		return PlanSummary{}, err
	}
	if err := r.Init(ctx); err != nil {
		return PlanSummary{}, err
	}
	p, err := r.Plan(ctx, destroy)
	if err != nil {
		return PlanSummary{}, err
	}
	step := "apply the OpenTofu/Terraform plan in " + a.dir()
	if a.vpc.Reuse {
		step += fmt.Sprintf(" (VPC %s is reused and never deleted)", a.vpc.ID)
	}
	return PlanSummary{Add: p.Add, Change: p.Change, Destroy: p.Destroy, Text: p.Text, Steps: []string{step}}, nil
}

// Config implements Infra: the variables file is what setup stores
// beside the state.
func (a *AWSInfra) Config(infra.Cluster) ([]byte, error) {
	if a.vars == nil {
		return nil, errors.New("no variables rendered (a Podmin bug: Plan renders them)")
	}
	data, err := json.MarshalIndent(a.vars, "", "  ")
	return append(data, '\n'), err
}

// Commit implements Infra: it publishes the node dependencies the
// plan was made with.
func (a *AWSInfra) Commit(ctx context.Context, cl infra.Cluster) error {
	return a.Bootstrap.Publish(ctx, cl)
}

// Apply implements Infra: it applies exactly the shown plan.
func (a *AWSInfra) Apply(ctx context.Context, _ infra.Cluster) error {
	r := a.runner()
	return r.Apply(ctx)
}

// storedVars reads the variables setup stored beside the state; ok is
// false when the cluster has no infrastructure state at all.
func (a *AWSInfra) storedVars(ctx context.Context, c contexts.Context) (infra.Vars, bool, error) {
	_, b, err := a.Host.OpenCluster(ctx)
	if err != nil {
		return infra.Vars{}, false, err
	}
	_, stateErr := b.Head(ctx, state.TFStatePath)
	obj, err := b.Get(ctx, state.TFVarsPath, objstore.GetOptions{})
	switch {
	case errors.Is(err, objstore.ErrNotFound) && errors.Is(stateErr, objstore.ErrNotFound):
		return infra.Vars{}, false, nil
	case errors.Is(err, objstore.ErrNotFound):
		return infra.Vars{}, false, fmt.Errorf("%w: %s exists but %s does not, so Podmin cannot show what the state belongs to: nothing was changed; put back the variables setup published (the module directory %s keeps a copy as %s)", ErrNotOwned, state.TFStatePath, state.TFVarsPath, a.dir(), infra.VarsFile)
	case err != nil:
		return infra.Vars{}, false, fmt.Errorf("read %s: %w", state.TFVarsPath, err)
	}
	var v infra.Vars
	if err := json.Unmarshal(obj.Data, &v); err != nil {
		return infra.Vars{}, false, fmt.Errorf("%s is not valid: %w", state.TFVarsPath, err)
	}
	if v.Cluster != c.Cluster {
		return infra.Vars{}, false, fmt.Errorf("%w: %s names cluster %q, not %q: nothing was changed", ErrNotOwned, state.TFVarsPath, v.Cluster, c.Cluster)
	}
	if errors.Is(stateErr, objstore.ErrNotFound) {
		return v, false, nil
	}
	return v, true, nil
}

// PlanDestroy implements Infra: it re-renders the module with the
// stored variables, so teardown works from any machine, and plans the
// destroy of what the state holds.
func (a *AWSInfra) PlanDestroy(ctx context.Context, c contexts.Context) (PlanSummary, error) {
	v, ok, err := a.storedVars(ctx, c)
	if err != nil || !ok {
		return PlanSummary{Steps: []string{"no OpenTofu/Terraform state: no compute or networking to destroy"}}, err
	}
	a.vars = &v
	a.vpc = infra.VPCChoice{ID: v.ExistingVPCID, Reuse: v.ExistingVPCID != ""}
	return a.plan(ctx, v, true)
}

// Destroy implements Infra. A VPC the state created must still carry
// this cluster's tag and create nonce, and outputs that cannot be read stop
// it; a reused VPC is only read by the module and never deleted.
func (a *AWSInfra) Destroy(ctx context.Context, c contexts.Context) error {
	if a.vars == nil {
		return nil // PlanDestroy found no state
	}
	if _, err := os.Stat(filepath.Join(a.dir(), infra.PlanFile)); err != nil {
		return fmt.Errorf("no destroy plan in %s: %w", a.dir(), err)
	}
	r := a.runner()
	outs, err := r.Outputs(ctx)
	if err != nil {
		return err
	}
	vpc, created, err := infra.CreatedVPC(outs)
	if err != nil {
		return err
	}
	if created {
		if err := infra.CheckOwnedVPC(ctx, a.EC2, vpc, c.Cluster, a.vars.CreateNonce); err != nil {
			return err
		}
	}
	return r.Apply(ctx)
}
