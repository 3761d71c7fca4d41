// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"fmt"
	"strings"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/staticpod"
)

// DeploymentStatus is what this node reports about its NodeGroup's
// deployments (the coordinator's report to the leader), served as metrics
// and as /readyz?verbose detail. Without coordination it has the
// reconciler's view alone: readiness is unknown.
type DeploymentStatus struct {
	rec interface {
		Deployments() []staticpod.DeploymentState
	}
	coord *Coordinator
}

// NewDeploymentStatus reports rec's deployments, through the node's
// coordinator when it has one (n may be nil).
func NewDeploymentStatus(rec interface {
	Deployments() []staticpod.DeploymentState
}, n *Node) *DeploymentStatus {
	return &DeploymentStatus{rec: rec, coord: n.Coordinator()}
}

// reports returns one report per deployment, sorted by name.
func (d *DeploymentStatus) reports() []*pb.DeploymentReport {
	if d.coord != nil {
		return d.coord.StatusReport().GetDeployments()
	}
	var out []*pb.DeploymentReport
	for _, s := range d.rec.Deployments() {
		r := &pb.DeploymentReport{Name: s.Deployment.Name, Revision: s.Applied, Desired: s.Desired, Waiting: s.Waiting, Retiring: s.Retiring,
			Readiness: pb.Readiness_READINESS_UNKNOWN, Reason: "coordination is off: readiness is not followed"}
		if !s.AppliedAt.IsZero() && s.Applied != "" {
			r.AppliedAtUnixMs = s.AppliedAt.UnixMilli()
		}
		if s.Error != nil {
			r.Error = &pb.ReportedError{Kind: s.Error.Kind, Message: s.Error.Message, Revision: s.Error.Revision}
		}
		out = append(out, r)
	}
	return out
}

func (d *DeploymentStatus) WriteMetrics(w *health.Writer) {
	reps := d.reports()
	families := []struct {
		name, help string
		value      func(r *pb.DeploymentReport) (float64, []health.LabelPair)
	}{
		{"podmin_agent_deployment_applied", "1 when the node's static Pod runs the revision the deployment index names, else 0.",
			func(r *pb.DeploymentReport) (float64, []health.LabelPair) {
				return boolValue(r.Revision != "" && r.Revision == r.Desired), nil
			}},
		{"podmin_agent_deployment_ready", "Kubelet readiness of the Pod of the applied revision: 1 ready, 0 not ready, -1 unknown (no kubelet answers).",
			func(r *pb.DeploymentReport) (float64, []health.LabelPair) {
				switch r.Readiness {
				case pb.Readiness_READINESS_READY:
					return 1, nil
				case pb.Readiness_READINESS_NOT_READY:
					return 0, nil
				}
				return -1, nil
			}},
		{"podmin_agent_deployment_restarts", "Restarts of the containers of the Pod of the applied revision, as kubelet counts them.",
			func(r *pb.DeploymentReport) (float64, []health.LabelPair) { return float64(r.Restarts), nil }},
		{"podmin_agent_deployment_waiting", "1 while the node waits for a rollout slot to apply the deployment's new revision.",
			func(r *pb.DeploymentReport) (float64, []health.LabelPair) { return boolValue(r.Waiting != ""), nil }},
		{"podmin_agent_deployment_error", "1 while the node reports an error for the deployment, labelled by kind (payload, secret, identity, file, kubelet).",
			func(r *pb.DeploymentReport) (float64, []health.LabelPair) {
				if r.Error == nil {
					return 0, []health.LabelPair{health.Label("kind", "")}
				}
				return 1, []health.LabelPair{health.Label("kind", r.Error.Kind)}
			}},
		{"podmin_agent_deployment_applied_timestamp_seconds", "When the node wrote the static Pod of the applied revision, in seconds since the epoch (0: none).",
			func(r *pb.DeploymentReport) (float64, []health.LabelPair) {
				return float64(r.AppliedAtUnixMs) / 1000, nil
			}},
	}
	for _, f := range families {
		w.Family(f.name, "gauge", f.help)
		for _, r := range reps {
			v, extra := f.value(r)
			w.Sample(f.name, v, append([]health.LabelPair{health.Label("deployment", r.Name)}, extra...)...)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Detail is one line per deployment for /readyz?verbose.
func (d *DeploymentStatus) Detail() []string {
	var out []string
	for _, r := range d.reports() {
		var b strings.Builder
		fmt.Fprintf(&b, "deployment %s: ", r.Name)
		switch {
		case r.Revision == "":
			b.WriteString("no static Pod")
		case r.Revision == r.Desired:
			fmt.Fprintf(&b, "revision %s applied", shortRevision(r.Revision))
		default:
			fmt.Fprintf(&b, "revision %s applied, %s desired", shortRevision(r.Revision), shortRevision(r.Desired))
		}
		switch r.Readiness {
		case pb.Readiness_READINESS_READY:
			b.WriteString(", ready")
		case pb.Readiness_READINESS_NOT_READY:
			fmt.Fprintf(&b, ", not ready (%s)", r.Reason)
		default:
			fmt.Fprintf(&b, ", readiness unknown (%s)", r.Reason)
		}
		fmt.Fprintf(&b, ", %d restart(s)", r.Restarts)
		if r.Waiting != "" {
			fmt.Fprintf(&b, "; waiting for a rollout slot: %s", r.Waiting)
		}
		if r.Retiring != "" {
			fmt.Fprintf(&b, "; the Pod of revision %s still runs beside it (maxSurge) until it may go", shortRevision(r.Retiring))
		}
		if r.Error != nil {
			fmt.Fprintf(&b, "; error (%s) for revision %s: %s", r.Error.Kind, shortRevision(r.Error.Revision), r.Error.Message)
		}
		out = append(out, b.String())
	}
	return out
}

func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
