// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pods

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/internal/nodepod"
)

// State is what kubelet says about one Pod: whether it is ready, how often
// its containers restarted, and the problem it reports, if any.
type State struct {
	Ready bool
	// Restarts sums the restart counts of the Pod's containers.
	Restarts int
	// Problem is kubelet's account of a failing Pod ("container web:
	// CrashLoopBackOff: ...", or "container web: exited with code 3 (Error),
	// 2 restart(s)" for a container that exited again after a restart),
	// empty while nothing fails. A Pod still being created
	// (ContainerCreating, PodInitializing) has none, nor does a container
	// that exited for the first time (kubelet restarts it).
	Problem string
	// Retrying is kubelet's account of an image pull that failed only
	// because the node's own registry did not accept the connection (see
	// StateOptions.NodeRegistry): kubelet pulls again after its back-off
	// and reaches it. Empty when there is none.
	Retrying string
}

// StateOptions say what StateOf may know of the node.
type StateOptions struct {
	// NodeRegistry is the address of the node's registry while the agent
	// that asks serves it, "" otherwise. That registry is the agent
	// itself: a pull that found its port closed ran while the agent was
	// not running, and its failure does not last.
	NodeRegistry string
}

// failing are the waiting reasons kubelet gives a container that does not
// get better by waiting: the image cannot be had, the container cannot be
// created, or it keeps exiting.
var failing = []string{
	"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "PreStartHookError", "PostStartHookError",
}

// StateOf reads p's readiness, restarts and problem.
func StateOf(p *corev1.Pod) State { return StateOfWith(p, StateOptions{}) }

// refusedPull reports whether a waiting reason and message say that an
// image pull failed at connecting to the registry at addr and nothing else.
func refusedPull(reason, message, addr string) bool {
	if addr == "" || reason != "ErrImagePull" && reason != "ImagePullBackOff" {
		return false
	}
	return strings.Contains(message, "dial tcp "+addr+": connect: connection refused")
}

// StateOfWith reads p's readiness, restarts and problem as StateOf does,
// telling apart pulls that failed while the node's registry was down.
func StateOfWith(p *corev1.Pod, o StateOptions) State {
	s := State{Ready: IsReady(p)}
	var problems, retrying []string
	if p.Status.Phase == corev1.PodFailed {
		problems = append(problems, strings.TrimSpace("the Pod failed: "+p.Status.Reason+" "+p.Status.Message))
	}
	restartsOnSuccess := p.Spec.RestartPolicy == "" || p.Spec.RestartPolicy == corev1.RestartPolicyAlways
	check := func(cs []corev1.ContainerStatus, regular bool) {
		for _, c := range cs {
			s.Restarts += int(c.RestartCount)
			if t := c.State.Terminated; t != nil && c.RestartCount > 0 && (t.ExitCode != 0 || regular && restartsOnSuccess) {
				// Exited again after a restart: kubelet reports this
				// between its restarts, often instead of CrashLoopBackOff.
				msg := fmt.Sprintf("container %s: exited with code %d", c.Name, t.ExitCode)
				if t.Reason != "" {
					msg += " (" + t.Reason + ")"
				}
				problems = append(problems, fmt.Sprintf("%s, %d restart(s)", msg, c.RestartCount))
				continue
			}
			w := c.State.Waiting
			if w == nil || !slices.Contains(failing, w.Reason) {
				continue
			}
			msg := fmt.Sprintf("container %s: %s", c.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if t := c.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(" (last exit code %d", t.ExitCode)
				if t.Reason != "" {
					msg += ", " + t.Reason
				}
				msg += ")"
			}
			if refusedPull(w.Reason, w.Message, o.NodeRegistry) {
				retrying = append(retrying, msg)
				continue
			}
			problems = append(problems, msg)
		}
	}
	check(p.Status.InitContainerStatuses, false)
	check(p.Status.ContainerStatuses, true)
	s.Problem = strings.Join(problems, "; ")
	s.Retrying = strings.Join(retrying, "; ")
	return s
}

// Revision is the podmin.dev/revision of a Pod kubelet runs from a Podmin
// static Pod file, "" for any other Pod.
func Revision(p *corev1.Pod) string { return p.Annotations[nodepod.RevisionAnnotation] }

// HasReadinessProbes reports whether every container of p that kubelet
// counts towards the Pod's readiness (its containers and its sidecar init
// containers) has a readiness probe. Kubelet reports a container without
// one ready as soon as it starts, which proves nothing about whether it
// stays up. A Pod whose spec lists no containers (kubelet sent none) has
// none.
func HasReadinessProbes(p *corev1.Pod) bool {
	if len(p.Spec.Containers) == 0 {
		return false
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways && c.ReadinessProbe == nil {
			return false
		}
	}
	for _, c := range p.Spec.Containers {
		if c.ReadinessProbe == nil {
			return false
		}
	}
	return true
}

// ReadySince returns when, by kubelet's account, p became ready: at or
// after from and at or before to, the later of the PodReady condition's
// last transition and the latest start of a running container. Both are
// zero when p is not ready or kubelet gives neither time. Kubernetes sends
// these times in whole seconds, cut off, so a whole-second time stands for
// its whole second: to is then a second after from.
func ReadySince(p *corev1.Pod) (from, to time.Time) {
	ready := false
	later := func(t time.Time) {
		if t.After(from) {
			from = t
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
			later(c.LastTransitionTime.Time)
		}
	}
	if !ready {
		return time.Time{}, time.Time{}
	}
	for _, cs := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range cs {
			if r := c.State.Running; r != nil {
				later(r.StartedAt.Time)
			}
		}
	}
	if from.IsZero() {
		return time.Time{}, time.Time{}
	}
	if from.Equal(from.Truncate(time.Second)) {
		return from, from.Add(time.Second)
	}
	return from, from
}
