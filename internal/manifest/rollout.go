// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// MaxUnavailableAnnotation carries a DaemonSet's
// spec.updateStrategy.rollingUpdate.maxUnavailable to the nodes, in the
// Pod payload, when it is not the default of 1: "2" or "25%". The index
// keeps its format; the value is part of the payload, so changing it makes
// a new revision, which then rolls out under the new value. Payloads of
// DaemonSets that keep the default carry no annotation, so their bytes (and
// revisions) are those of Podmin versions before rolling updates.
const MaxUnavailableAnnotation = "podmin.dev/max-unavailable"

// DefaultMaxUnavailable is the Kubernetes default of
// RollingUpdateDaemonSet.maxUnavailable.
var DefaultMaxUnavailable = intstr.FromInt32(1)

// checkUpdateStrategy validates spec.updateStrategy and returns the
// annotation value to carry ("" for the default). Podmin honours
// RollingUpdate with maxUnavailable; OnDelete is refused, because nothing
// deletes a static Pod but a new revision (there is no API to delete one
// with), and maxSurge is refused, because a node runs one static Pod per
// deployment name and cannot run the old and the new one side by side.
func checkUpdateStrategy(p *problems, s appsv1.DaemonSetUpdateStrategy) string {
	const field = "spec.updateStrategy"
	switch s.Type {
	case "", appsv1.RollingUpdateDaemonSetStrategyType:
	case appsv1.OnDeleteDaemonSetStrategyType:
		p.add(subjectDaemonSet, field+".type", "OnDelete is not supported: a node replaces its static Pod only for a new revision, and Podmin has no API to delete Pods with; use RollingUpdate (the default), whose maxUnavailable paces the update across the NodeGroup")
		return ""
	default:
		p.add(subjectDaemonSet, field+".type", "%q is not a DaemonSet update strategy: use RollingUpdate", string(s.Type))
		return ""
	}
	r := s.RollingUpdate
	if r == nil {
		return ""
	}
	if r.MaxSurge != nil && !(r.MaxSurge.Type == intstr.Int && r.MaxSurge.IntVal == 0) && r.MaxSurge.String() != "0%" {
		p.add(subjectDaemonSet, field+".rollingUpdate.maxSurge", "is not supported: a node runs one static Pod per deployment, so the old and the new Pod cannot run side by side; remove it and pace the update with maxUnavailable")
	}
	if r.MaxUnavailable == nil {
		return ""
	}
	raw := r.MaxUnavailable.String()
	if r.MaxUnavailable.Type == intstr.String && !strings.HasSuffix(raw, "%") {
		p.add(subjectDaemonSet, field+".rollingUpdate.maxUnavailable", "%q is a string but not a percentage: write a number of nodes without quotes, or a percentage such as 25%%", raw)
		return ""
	}
	v, err := ParseMaxUnavailable(raw)
	if err != nil {
		p.add(subjectDaemonSet, field+".rollingUpdate.maxUnavailable", "%v", err)
		return ""
	}
	if v == DefaultMaxUnavailable {
		return ""
	}
	return v.String()
}

// ParseMaxUnavailable reads a maxUnavailable value: a positive integer or
// a percentage from 1% to 100%. Zero is refused, as Kubernetes refuses it
// without maxSurge: nothing could ever be updated.
func ParseMaxUnavailable(s string) (intstr.IntOrString, error) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 1 || n > 100 || pct != strconv.Itoa(n) {
			return intstr.IntOrString{}, fmt.Errorf("%q is not a percentage from 1%% to 100%%: use e.g. 25%% or an absolute number of nodes", s)
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || s != strconv.Itoa(n) {
		return intstr.IntOrString{}, fmt.Errorf("%q is not a positive number of nodes or a percentage: use e.g. 1, 2 or 25%% (0 would never let a node update)", s)
	}
	return intstr.FromInt(n), nil
}

// PodMaxUnavailable returns the maxUnavailable a Pod payload carries: its
// MaxUnavailableAnnotation, or DefaultMaxUnavailable without one.
func PodMaxUnavailable(podYAML []byte) (intstr.IntOrString, error) {
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(podYAML, &pod); err != nil {
		return intstr.IntOrString{}, fmt.Errorf("read %s: %w", MaxUnavailableAnnotation, err)
	}
	v, ok := pod.Metadata.Annotations[MaxUnavailableAnnotation]
	if !ok {
		return DefaultMaxUnavailable, nil
	}
	out, err := ParseMaxUnavailable(v)
	if err != nil {
		return intstr.IntOrString{}, fmt.Errorf("annotation %s: %w", MaxUnavailableAnnotation, err)
	}
	return out, nil
}

// AllowedUnavailable is how many of nodes may be unavailable at once under
// maxUnavailable, computed as Kubernetes' DaemonSet controller does:
// pkg/controller/daemonset/util's UnavailableCount calls
// intstr.GetScaledValueFromIntOrPercent(maxUnavailable,
// desiredNumberScheduled, true), so a percentage rounds UP (the API
// reference: "Absolute number is calculated from percentage by rounding
// up"): 25% of 3 nodes is 1, 50% of 3 is 2, 1% of 1000 is 10. It is at
// least 1, so a rollout always progresses on a NodeGroup with nodes.
func AllowedUnavailable(maxUnavailable intstr.IntOrString, nodes int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, nodes, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}
