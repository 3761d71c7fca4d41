// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// StatusVersion is the version of the NodeGroupStatus format.
const StatusVersion = 1

// MaxStatusBytes bounds one NodeGroup's status object: a reader refuses a
// larger one before decoding it.
const MaxStatusBytes = 16 << 20

// Readiness values a node reports for its Pod of a deployment.
const (
	// Ready: kubelet computed PodReady=True for the Pod of the applied
	// revision.
	Ready = "ready"
	// NotReady: kubelet answers, but the Pod of the applied revision is
	// not ready (or not running yet, or there is no static Pod).
	NotReady = "not-ready"
	// Unknown: no kubelet answers on the node, so readiness cannot be
	// known.
	Unknown = "unknown"
)

// Node states of a NodeGroupStatus.
const (
	// NodeLive is a node the leader heard from within the lease window.
	NodeLive = "live"
	// NodeMissing is a node the leader knew and no longer hears from, while
	// the NodeGroup has fewer live nodes than its configured size.
	NodeMissing = "missing"
)

// Error kinds a node or the leader reports for a deployment.
const (
	// ErrorPayload: the Pod or Service payload is missing, corrupt or
	// cannot become a static Pod.
	ErrorPayload = "payload"
	// ErrorSecret: a declared secret or configuration value cannot be
	// fetched or mounted.
	ErrorSecret = "secret"
	// ErrorIdentity: the Pod's workload identity cannot be issued.
	ErrorIdentity = "identity"
	// ErrorFile: the static Pod file cannot be written or removed.
	ErrorFile = "file"
	// ErrorImage: an image of the new revision cannot be pulled into the
	// node's container runtime: the running revision keeps serving.
	ErrorImage = "image"
	// ErrorKubelet: kubelet reports the Pod failing (a container in
	// CrashLoopBackOff, an image that cannot be pulled, ...).
	ErrorKubelet = "kubelet"
	// ErrorRollout: the leader gave the node a rollout slot and the node
	// did not report the revision ready within the slot timeout.
	ErrorRollout = "rollout"
)

// NodeGroupStatus is status/nodegroups/<nodegroup>.json: the observed state
// of one NodeGroup as the coordination leader last published it. The
// leader writes it only when what it says changes (UpdatedAt changes only
// then), so an unchanged NodeGroup costs no writes; a reader proves the
// object current with the lease (dns/leader.json): the leader of Term must
// still hold a live lease.
type NodeGroupStatus struct {
	Version   int    `json:"version"`
	NodeGroup string `json:"nodegroup"`
	// Leader and Term name the leadership that wrote the object.
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	// UpdatedAt is when the leader wrote this content.
	UpdatedAt time.Time `json:"updatedAt"`
	// Settled is false while a new leader still waits for the reports of
	// the nodes its predecessor knew: until then a node may be missing
	// only because it has not reported yet.
	Settled bool `json:"settled"`
	// Expected is the NodeGroup's configured size (the published cluster
	// configuration); nil when no configuration names the NodeGroup.
	Expected *int `json:"expected"`
	// Live counts the live nodes; Missing is Expected minus Live when
	// positive.
	Live    int `json:"live"`
	Missing int `json:"missing"`
	// Nodes are the live nodes and the known missing ones, sorted by ID.
	Nodes []NodeStatus `json:"nodes"`
	// Rollouts are the deployments whose nodes wait for or hold rollout
	// slots, sorted by name.
	Rollouts []RolloutStatus `json:"rollouts"`
	// Refused are the agents of the NodeGroup whose claim the leader
	// refused within the lease window, sorted by node and address;
	// omitted when there are none.
	Refused []RefusedNode `json:"refused,omitempty"`
}

// RefusedNode is an agent whose claim the leader refused: its node ID is
// another live agent's, its address or Pod prefix another node's, or its
// Hello does not match its certificate. It takes no part in coordination,
// so the endpoints of its Pods are not served.
type RefusedNode struct {
	Node    string `json:"node"`
	Address string `json:"address"`
	Reason  string `json:"reason"`
	// Since is when the leader first refused it (it asks again every few
	// seconds while it runs).
	Since time.Time `json:"since"`
}

// NodeStatus is one node of a NodeGroupStatus.
type NodeStatus struct {
	Node    string `json:"node"`
	Address string `json:"address"`
	// State is NodeLive or NodeMissing.
	State string `json:"state"`
	// Kubelet reports whether the node follows a kubelet Pods API; without
	// one readiness is Unknown and a rollout paces on applied revisions.
	Kubelet bool `json:"kubelet"`
	// Deployments are the node's reports, sorted by name.
	Deployments []DeploymentReport `json:"deployments"`
}

// DeploymentReport is what one node reports about one deployment of its
// NodeGroup.
type DeploymentReport struct {
	Name string `json:"name"`
	// Revision is the podmin.dev/revision of the node's static Pod file
	// ("" when it has none); AppliedAt is when the node wrote it.
	Revision  string     `json:"revision"`
	AppliedAt *time.Time `json:"appliedAt"`
	// Desired is the revision the node read from the deployment index.
	Desired string `json:"desired"`
	// Readiness is Ready, NotReady or Unknown, with Reason when not Ready.
	Readiness string `json:"readiness"`
	Reason    string `json:"reason"`
	// Restarts sums the restart counts of the Pod's containers.
	Restarts int `json:"restarts"`
	// Waiting, when set, says why the node has not applied Desired yet
	// (it waits for a rollout slot).
	Waiting string `json:"waiting"`
	// Retiring is the revision of the deployment's second Pod, which the
	// node still runs beside the one of Revision during a maxSurge
	// update; omitted while it runs one Pod of the deployment.
	Retiring string `json:"retiring,omitempty"`
	// Error is the node's last error for this deployment, nil when none.
	Error *ReportedError `json:"error"`
	// ReportedAt is when the leader received the report that made this
	// entry what it is.
	ReportedAt time.Time `json:"reportedAt"`
}

// ReportedError is an error a node (or the leader) reports for a
// deployment.
type ReportedError struct {
	// Kind is one of the Error* kinds.
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Revision is the revision the error is about.
	Revision string `json:"revision"`
}

// RolloutStatus is the leader's pacing of one deployment's rolling update.
type RolloutStatus struct {
	Name string `json:"name"`
	// Revision is the committed revision the slots are for.
	Revision string `json:"revision"`
	// MaxUnavailable is the DaemonSet's value ("1", "25%"); Allowed the
	// number of nodes it allows to be unavailable at once, or, with
	// MaxSurge (the DaemonSet's maxSurge, omitted when 0), to run a
	// second Pod of the deployment at once.
	MaxUnavailable string `json:"maxUnavailable"`
	MaxSurge       string `json:"maxSurge,omitempty"`
	Allowed        int    `json:"allowed"`
	// Updating are the nodes holding a slot, sorted.
	Updating []string `json:"updating"`
	// Waiting counts the nodes waiting for a slot.
	Waiting int `json:"waiting"`
	// Stuck are the nodes whose slot timed out before they reported the
	// revision ready, sorted.
	Stuck []string `json:"stuck"`
}

// ErrInvalidStatus reports a status object that does not decode strictly.
var ErrInvalidStatus = errors.New("invalid NodeGroup status")

// Encode returns the object's JSON: two-space indentation, every field
// present, and a trailing newline. Equal statuses are equal bytes.
func (s *NodeGroupStatus) Encode() ([]byte, error) {
	c := *s
	c.Version = StatusVersion
	if c.Nodes == nil {
		c.Nodes = []NodeStatus{}
	}
	if c.Rollouts == nil {
		c.Rollouts = []RolloutStatus{}
	}
	for i := range c.Nodes {
		if c.Nodes[i].Deployments == nil {
			c.Nodes[i].Deployments = []DeploymentReport{}
		}
	}
	for i := range c.Rollouts {
		if c.Rollouts[i].Updating == nil {
			c.Rollouts[i].Updating = []string{}
		}
		if c.Rollouts[i].Stuck == nil {
			c.Rollouts[i].Stuck = []string{}
		}
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DecodeNodeGroupStatus parses a status object strictly: unknown fields, a
// version other than StatusVersion and trailing data are errors.
func DecodeNodeGroupStatus(data []byte) (*NodeGroupStatus, error) {
	if len(data) > MaxStatusBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d byte limit", ErrInvalidStatus, len(data), MaxStatusBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s NodeGroupStatus
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStatus, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the object", ErrInvalidStatus)
	}
	if s.Version != StatusVersion {
		return nil, fmt.Errorf("%w: version %d, this podmin reads version %d: use a podmin of the agents' version", ErrInvalidStatus, s.Version, StatusVersion)
	}
	if err := validateNodeGroup(s.NodeGroup); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStatus, err)
	}
	return &s, nil
}

// ReadNodeGroupStatus reads one NodeGroup's status object. ok is false when
// there is none (no leader has published one yet).
func ReadNodeGroupStatus(ctx context.Context, store objstore.Store, nodegroup string) (s *NodeGroupStatus, etag string, ok bool, err error) {
	key, err := NodeGroupStatusPath(nodegroup)
	if err != nil {
		return nil, "", false, err
	}
	obj, err := store.Get(ctx, key, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("read %s: %w", key, err)
	}
	if s, err = DecodeNodeGroupStatus(obj.Data); err != nil {
		return nil, "", false, fmt.Errorf("%s: %w", key, err)
	}
	if s.NodeGroup != nodegroup {
		return nil, "", false, fmt.Errorf("%s: %w: it describes NodeGroup %q", key, ErrInvalidStatus, s.NodeGroup)
	}
	return s, obj.ETag, true, nil
}
