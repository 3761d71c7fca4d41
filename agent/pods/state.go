// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pods

import (
	"fmt"
	"slices"
	"strings"

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
	// CrashLoopBackOff: ..."), empty while nothing fails. A Pod still
	// being created (ContainerCreating, PodInitializing) has none.
	Problem string
}

// failing are the waiting reasons kubelet gives a container that does not
// get better by waiting: the image cannot be had, the container cannot be
// created, or it keeps exiting.
var failing = []string{
	"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "PreStartHookError", "PostStartHookError",
}

// StateOf reads p's readiness, restarts and problem.
func StateOf(p *corev1.Pod) State {
	s := State{Ready: IsReady(p)}
	var problems []string
	if p.Status.Phase == corev1.PodFailed {
		problems = append(problems, strings.TrimSpace("the Pod failed: "+p.Status.Reason+" "+p.Status.Message))
	}
	check := func(cs []corev1.ContainerStatus) {
		for _, c := range cs {
			s.Restarts += int(c.RestartCount)
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
			problems = append(problems, msg)
		}
	}
	check(p.Status.InitContainerStatuses)
	check(p.Status.ContainerStatuses)
	s.Problem = strings.Join(problems, "; ")
	return s
}

// Revision is the podmin.dev/revision of a Pod kubelet runs from a Podmin
// static Pod file, "" for any other Pod.
func Revision(p *corev1.Pod) string { return p.Annotations[nodepod.RevisionAnnotation] }
