// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// MaxSurgeAnnotation carries a DaemonSet's non-zero maxSurge ("1",
// "25%") to the nodes the same way. Kubernetes allows a non-zero maxSurge
// only with maxUnavailable 0, so a payload carrying it has no
// MaxUnavailableAnnotation: its maxUnavailable is 0.
const MaxSurgeAnnotation = "podmin.dev/max-surge"

// DefaultMaxUnavailable is the Kubernetes default of
// RollingUpdateDaemonSet.maxUnavailable.
var DefaultMaxUnavailable = intstr.FromInt32(1)

// Strategy is a DaemonSet's rolling update as the nodes honour it. With a
// MaxSurge other than zero (and MaxUnavailable zero) a node starts the new
// revision as a second Pod beside the running one and stops the old one
// once the new one is ready; otherwise it replaces the Pod in place, as
// MaxUnavailable allows.
type Strategy struct {
	MaxUnavailable, MaxSurge intstr.IntOrString
}

// Surges reports whether the strategy starts the new Pod beside the old.
func (s Strategy) Surges() bool { return !zeroIntOrPercent(s.MaxSurge) }

func zeroIntOrPercent(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return v.StrVal == "0%" || v.StrVal == ""
}

// checkUpdateStrategy validates spec.updateStrategy as Kubernetes does
// (ValidateRollingUpdateDaemonSet: each value a non-negative integer or a
// percentage up to 100%, exactly one of maxUnavailable, defaulting to 1,
// and maxSurge, defaulting to 0, not zero) and returns the annotations
// that carry it (none for the default). OnDelete is refused, because
// nothing deletes a static Pod but a new revision (there is no API to
// delete one with). maxSurge is refused where the two Pods of a node
// could not run side by side: under hostNetwork, or with a hostPort, both
// would need the same ports of the node's address.
func checkUpdateStrategy(p *problems, s appsv1.DaemonSetUpdateStrategy, spec *corev1.PodSpec) map[string]string {
	const field = "spec.updateStrategy"
	switch s.Type {
	case "", appsv1.RollingUpdateDaemonSetStrategyType:
	case appsv1.OnDeleteDaemonSetStrategyType:
		p.add(subjectDaemonSet, field+".type", "OnDelete is not supported: a node replaces its static Pod only for a new revision, and Podmin has no API to delete Pods with; use RollingUpdate (the default), whose maxUnavailable or maxSurge paces the update across the NodeGroup")
		return nil
	default:
		p.add(subjectDaemonSet, field+".type", "%q is not a DaemonSet update strategy: use RollingUpdate", string(s.Type))
		return nil
	}
	r := s.RollingUpdate
	if r == nil {
		return nil
	}
	unavailable, uok := intOrPercent(p, field+".rollingUpdate.maxUnavailable", r.MaxUnavailable, DefaultMaxUnavailable)
	surge, sok := intOrPercent(p, field+".rollingUpdate.maxSurge", r.MaxSurge, intstr.FromInt32(0))
	if !uok || !sok {
		return nil
	}
	st := Strategy{MaxUnavailable: unavailable, MaxSurge: surge}
	switch {
	case st.Surges() && !zeroIntOrPercent(unavailable):
		defaulted := ""
		if r.MaxUnavailable == nil {
			defaulted = " (it defaults to 1)"
		}
		p.add(subjectDaemonSet, field+".rollingUpdate.maxSurge", "may not be set when maxUnavailable is not 0%s: set maxUnavailable: 0 to start each node's new Pod beside its old one, or remove maxSurge to replace Pods in place", defaulted)
		return nil
	case !st.Surges() && zeroIntOrPercent(unavailable):
		p.add(subjectDaemonSet, field+".rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0: no node could ever update; use e.g. maxUnavailable: 1, or maxSurge: 1 with maxUnavailable: 0 to start each node's new Pod beside its old one")
		return nil
	case st.Surges():
		if !checkSurgeable(p, spec) {
			return nil
		}
		return map[string]string{MaxSurgeAnnotation: surge.String()}
	case unavailable == DefaultMaxUnavailable:
		return nil
	}
	return map[string]string{MaxUnavailableAnnotation: unavailable.String()}
}

// checkSurgeable refuses maxSurge for a Pod that cannot run twice on one
// node: its second Pod would need the node's own ports while the first
// holds them (Kubernetes' scheduler would never place it).
func checkSurgeable(p *problems, spec *corev1.PodSpec) bool {
	const why = "maxSurge starts the new Pod beside the old one on each node, and both cannot bind the same ports of the node's address: remove maxSurge (and pace the update with maxUnavailable)"
	ok := true
	if spec.HostNetwork {
		p.add(subjectDaemonSet, "spec.updateStrategy.rollingUpdate.maxSurge", "cannot be used with spec.template.spec.hostNetwork: the Pod has no address of its own; %s", why)
		ok = false
	}
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i, c := range list.containers {
			for j, port := range c.Ports {
				if port.HostPort != 0 {
					p.add(subjectDaemonSet, "spec.updateStrategy.rollingUpdate.maxSurge", "cannot be used with spec.template.spec.%s[%d].ports[%d].hostPort %d: %s",
						list.field, i, j, port.HostPort, why)
					ok = false
				}
			}
		}
	}
	return ok
}

// intOrPercent reads one rolling update value as Kubernetes validates it:
// a non-negative integer, or a percentage from 0% to 100% (a number in
// quotes is neither). nil is def.
func intOrPercent(p *problems, field string, v *intstr.IntOrString, def intstr.IntOrString) (intstr.IntOrString, bool) {
	if v == nil {
		return def, true
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			p.add(subjectDaemonSet, field, "%d is negative: use a number of nodes (0 or more) or a percentage such as 25%%", v.IntVal)
			return intstr.IntOrString{}, false
		}
		return *v, true
	}
	raw := v.StrVal
	pct, isPct := strings.CutSuffix(raw, "%")
	n, err := strconv.Atoi(pct)
	switch {
	case !isPct:
		p.add(subjectDaemonSet, field, "%q is a string but not a percentage: write a number of nodes without quotes, or a percentage such as 25%%", raw)
	case err != nil || n < 0 || pct != strconv.Itoa(n):
		p.add(subjectDaemonSet, field, "%q is not a percentage: use e.g. 25%% or a number of nodes without quotes", raw)
	case n > 100:
		p.add(subjectDaemonSet, field, "%q is more than 100%%: use a percentage from 0%% to 100%% or a number of nodes", raw)
	default:
		return *v, true
	}
	return intstr.IntOrString{}, false
}

// ParseMaxUnavailable reads a maxUnavailable annotation: a positive
// integer or a percentage from 1% to 100% (a payload carries 0 as a
// MaxSurgeAnnotation instead).
func ParseMaxUnavailable(s string) (intstr.IntOrString, error) {
	return parsePositive(s)
}

// ParseMaxSurge reads a MaxSurgeAnnotation: a positive integer or a
// percentage from 1% to 100%.
func ParseMaxSurge(s string) (intstr.IntOrString, error) {
	return parsePositive(s)
}

func parsePositive(s string) (intstr.IntOrString, error) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 1 || n > 100 || pct != strconv.Itoa(n) {
			return intstr.IntOrString{}, fmt.Errorf("%q is not a percentage from 1%% to 100%%: use e.g. 25%% or an absolute number of nodes", s)
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || s != strconv.Itoa(n) {
		return intstr.IntOrString{}, fmt.Errorf("%q is not a positive number of nodes or a percentage: use e.g. 1, 2 or 25%%", s)
	}
	return intstr.FromInt(n), nil
}

// PodMaxUnavailable returns the maxUnavailable a Pod payload carries: its
// MaxUnavailableAnnotation, or DefaultMaxUnavailable without one.
func PodMaxUnavailable(podYAML []byte) (intstr.IntOrString, error) {
	s, err := PodStrategy(podYAML)
	return s.MaxUnavailable, err
}

// PodStrategy returns the rolling update a Pod payload carries: a
// MaxSurgeAnnotation (maxUnavailable then 0), else its
// MaxUnavailableAnnotation or DefaultMaxUnavailable.
func PodStrategy(podYAML []byte) (Strategy, error) {
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(podYAML, &pod); err != nil {
		return Strategy{}, fmt.Errorf("read the rolling update annotations: %w", err)
	}
	a := pod.Metadata.Annotations
	st := Strategy{MaxUnavailable: DefaultMaxUnavailable, MaxSurge: intstr.FromInt32(0)}
	if v, ok := a[MaxSurgeAnnotation]; ok {
		if _, both := a[MaxUnavailableAnnotation]; both {
			return Strategy{}, fmt.Errorf("the payload carries both %s and %s: redeploy it with a current podmin", MaxSurgeAnnotation, MaxUnavailableAnnotation)
		}
		s, err := ParseMaxSurge(v)
		if err != nil {
			return Strategy{}, fmt.Errorf("annotation %s: %w", MaxSurgeAnnotation, err)
		}
		st.MaxSurge, st.MaxUnavailable = s, intstr.FromInt32(0)
		return st, nil
	}
	if v, ok := a[MaxUnavailableAnnotation]; ok {
		u, err := ParseMaxUnavailable(v)
		if err != nil {
			return Strategy{}, fmt.Errorf("annotation %s: %w", MaxUnavailableAnnotation, err)
		}
		st.MaxUnavailable = u
	}
	return st, nil
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

// AllowedSurge is how many of nodes may run a second Pod of a deployment
// at once under maxSurge, as Kubernetes' DaemonSet controller computes it
// (SurgeCount: a percentage rounds up) and at least 1, as the API
// reference says ("rounding up to a minimum of 1").
func AllowedSurge(maxSurge intstr.IntOrString, nodes int) int {
	return AllowedUnavailable(maxSurge, nodes)
}
