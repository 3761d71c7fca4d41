// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"context"
	"fmt"
	"sync"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/contexts"
)

// KindInfrastructure is a cluster's compute and networking.
const KindInfrastructure = "infrastructure"

// infraSource wraps the cloud infrastructure: checks and plans run for
// real (the plan without the state lock), apply and destroy are recorded.
type infraSource struct {
	r    *Recorder
	mu   sync.Mutex
	recs []record
}

func (s *infraSource) wrap(real func(context.Context, lifecycle.Host, contexts.Context) (lifecycle.Infra, error)) func(context.Context, lifecycle.Host, contexts.Context) (lifecycle.Infra, error) {
	return func(ctx context.Context, h lifecycle.Host, c contexts.Context) (lifecycle.Infra, error) {
		inf, err := real(ctx, h, c)
		if err != nil {
			return nil, err
		}
		if a, ok := inf.(*lifecycle.AWSInfra); ok && a.Runner != nil {
			r := *a.Runner
			r.NoLock = true
			a.Runner = &r
		}
		return &recordingInfra{Infra: inf, s: s, cluster: c.Cluster}, nil
	}
}

func (s *infraSource) add(rec record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, rec)
}

func (s *infraSource) records() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.recs...)
}

// recordingInfra records what Apply and Destroy would change.
type recordingInfra struct {
	lifecycle.Infra
	s       *infraSource
	cluster string
	plan    lifecycle.PlanSummary
}

func (i *recordingInfra) Plan(ctx context.Context, cl infra.Cluster) (lifecycle.PlanSummary, error) {
	p, err := i.Infra.Plan(ctx, cl)
	i.plan = p
	return p, err
}

func (i *recordingInfra) PlanDestroy(ctx context.Context, c contexts.Context) (lifecycle.PlanSummary, error) {
	p, err := i.Infra.PlanDestroy(ctx, c)
	i.plan = p
	return p, err
}

func summary(p lifecycle.PlanSummary) []byte {
	return fmt.Appendf(nil, "%d to add, %d to change, %d to destroy\n", p.Add, p.Change, p.Destroy)
}

// Apply records the plan instead of applying it.
func (i *recordingInfra) Apply(context.Context, infra.Cluster) error {
	i.s.add(record{seq: i.s.r.seq.Next(), kind: KindInfrastructure, where: "OpenTofu/Terraform", target: "cluster " + i.cluster,
		before: state{exists: true}, after: state{exists: true, data: summary(i.plan)}})
	return nil
}

// Destroy records the destroy plan instead of applying it.
func (i *recordingInfra) Destroy(context.Context, contexts.Context) error {
	if i.plan.Add+i.plan.Change+i.plan.Destroy == 0 && len(i.plan.Steps) == 0 {
		return nil
	}
	i.s.add(record{seq: i.s.r.seq.Next(), kind: KindInfrastructure, where: "OpenTofu/Terraform", target: "cluster " + i.cluster,
		before: state{exists: true, data: summary(i.plan)}, after: state{exists: false}})
	return nil
}
