// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"io"

	"podmin.dev/podmin/agent"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/agent/telemetry"
	"podmin.dev/podmin/internal/nodepod"
)

// usage writes the agent's help: what it does, its six flags, the
// environment settings, and the host paths it owns.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, `podmin-agent reconciles one NodeGroup's committed desired state (the cluster
bucket's deployments/index.json) into kubelet's static Pod directory on this node,
and serves the node's loopback health endpoints and read-only OCI registry.
With the cluster CA in the provider's system secrets store it also joins the
cluster's coordination (leader election on the bucket, mTLS gRPC on port 8081),
serves Service DNS from the leader's snapshots and programs the eBPF dataplane.
When the published cluster configuration (tfstate/podmin.auto.tfvars.json)
enables container log export (setup --otel-logs), it renders Fluent Bit's
configuration, installs the exporter CA bundle and maintains Fluent Bit's
client certificate, restarting Fluent Bit when they change.
It runs until SIGTERM (or SIGINT) and exits 1 when its configuration is invalid.
On SIGTERM it stops reconciling, takes its endpoints out of the leader's
Service snapshot (drain), waits the rest of the DNS TTL margin, resigns the
lease and exits. A pinned eBPF dataplane with Services stays attached under
its lease for the next agent to adopt (an upgrade or a restart keeps the
node's Service traffic); without Services, or unpinned, it is detached.

Usage:
  podmin-agent --provider aws|local --bucket BUCKET --region REGION \
               --cluster CLUSTER --nodegroup NODEGROUP --ipv6-prefix PREFIX/80

Flags (the six configuration flags are all required):
`)
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  --%-13s %s\n", f.Name, f.Usage)
	})
	fmt.Fprintf(w, `  --help          print this help and exit

Local node mode:
  With --provider local the bucket is a local directory: --bucket is an absolute
  directory or the name of a bucket in the Podmin data directory (the name NAME
  is $XDG_DATA_HOME/podmin/buckets/NAME), and --region is "local". Values of
  podmin.dev/local annotations come from the local secrets store in the same
  data directory. Commits are noticed within milliseconds through file
  notifications; the poll remains the correctness path. Kubelet's Pods API is
  watched only when its socket exists beneath %[1]s at startup.
  Once setup stored the cluster CA in the local secrets store, several agents on
  one machine (each with its own %[1]s, %[18]s, %[16]s and
  health address) form one cluster over one local bucket: they elect one
  leader (dns/leader.json), exchange endpoints over mTLS on loopback and serve
  Service DNS. Without the cluster CA the agent warns and publishes Pods alone.
  Together with %[1]s this runs a whole node unprivileged in a directory:

    %[1]s=$PWD/node %[2]s=1 podmin-agent --provider local --bucket NAME \
      --region local --cluster CLUSTER --nodegroup NODEGROUP \
      --ipv6-prefix 2001:db8:0:1:2::/80

Environment (settings of the process, not of the node):
  %-28[1]s directory standing in for / for every host path
                               (default /)
  %-28[2]s 1: run one reconcile pass and exit: 0 when the whole
                               NodeGroup was published, 1 otherwise (default 0)
  %-28[3]s index poll period, a Go duration (default %[4]s;
                               each wait is jittered within 80-100%% of it)
  %-28[5]s loopback address of /healthz, /readyz and /metrics
                               (default %[6]s)
  %-28[7]s loopback address of the read-only registry, or "off"
                               (default %[8]s)
  %-28[9]s wait between stopping reconciliation and exiting on
                               SIGTERM (default %[10]s)
  %-28[16]s loopback UDP and TCP address of Service DNS, or "off"
                               (default %[17]s)
  %-28[18]s coordination API listener (default [node IPv6]:8081;
                               local node mode: [::1]:8081, loopback only,
                               port 0 picks a free port)
  %-28[19]s node ID in the node's coordination identity
                               (default: host name; local: local-<API port>)
  %-28[20]s node global IPv6 address (default: the first global
                               address outside the Pod prefix; local:
                               2001:db8::<API port>)
  %-28[21]s auto, on or off: load the eBPF dataplane (auto: on for
                               aws as root on Linux, off in local node mode;
                               on in local node mode needs %[20]s)
  %-28[27]s window over which the Pod restarts that new workload
                               certificates cause are spread, each Pod at its
                               own point (from NodeGroup, node ID and Pod name);
                               a CA bundle change restarts none (default 30m,
                               at most 5h; 0: at once)
  %-28[30]s how long a Pod whose endpoints a rollout slot withdrew
                               keeps serving the connections it has after every
                               live node applied the withdrawal, before it is
                               replaced (default 5s, at most 10m; 0: at once)
  %[23]s
                               command restarting Fluent Bit after its
                               configuration, CA bundle or client certificate
                               changed, or "off" (default on aws:
                               %[24]s;
                               local node mode: none)
  %-28[14]s locate the Podmin data directory (local provider)
  %-28[15]s standard AWS configuration (aws provider), such as
                               AWS_PROFILE, AWS_REGION or AWS_ENDPOINT_URL_S3

Host paths (beneath %[1]s):
  %[11]s
      static Pod files, exclusively Podmin's: stale *.yaml files are removed
  %[12]s/<pod>
      the Pod's values and identity directory (tmpfs), removed with its file
  %[13]s
      kubelet's Pods API socket, watched for Pod readiness (aws provider;
      local provider when it exists at startup)
  /run/podmin/containerd/containerd.sock
      containerd's CRI socket, when it exists: images a pass adds are pulled
      before any file changes (a new revision whose images cannot be pulled
      keeps the running one, reported as an image error), and a Pod replaced
      by a new revision gets its new file once the old revision's sandbox
      stopped (at most 45 s later)
  %[22]s
      durable Service DNS identities, served at once after a restart
  %[29]s
      the cluster domain's zone, from which the node's CoreDNS answers
      Service names (and NXDOMAIN for the rest of the domain)
  %[28]s
      the pinned eBPF dataplane (bpffs), adopted by the next agent
  %[25]s
      Fluent Bit configuration (mode 0600, may hold exporter headers),
      written with container log export only
  %[26]s/ca.pem
      the exporter CA bundle (ca=), fetched at start and every 5 minutes;
      an invalid object keeps the last good bundle
  %[26]s/current -> identity-generations/<generation>
      Fluent Bit's client-only 24 h certificate (mtls=true), mode 0600

Endpoints (loopback only):
  /healthz   200 while the process serves
  /readyz    200 when the NodeGroup is published; 503 with one reason per line,
             naming every Pod kept at its last valid state, a missing bucket or
             vanished index (every published Pod is kept), a kubelet whose Pods
             API does not answer, a full disk, Service DNS records that cannot
             be written to disk, and any log export failure (which never holds
             Pods back)
  /metrics   reconcile passes, failures, restarts and per-Pod failures, the last
             successful pass and the index age; leadership and lease term; the
             Service snapshot's term, generation, revision and age; Service DNS
             answers by response code; the dataplane's packets, drops by reason,
             NAT-port exhaustion and map memory; registry bytes served and
             refusals by reason
`, agent.EnvRoot, agent.EnvOnce, agent.EnvPollInterval, agent.DefaultPollInterval, agent.EnvHealthAddr, health.DefaultAddr,
		agent.EnvRegistryAddr, registry.DefaultAddress, agent.EnvTTLMargin, agent.DefaultTTLMargin,
		nodepod.ManifestsDir, nodepod.WorkloadsDir, pods.SocketPath, "XDG_DATA_HOME, HOME", "AWS_*",
		agent.EnvDNSAddr, service.DefaultAddr, agent.EnvAPIAddr, agent.EnvNodeID, agent.EnvNodeAddr, agent.EnvDataplane,
		service.DefaultStatePath, agent.EnvFluentBitRestart, telemetry.DefaultFluentBitRestart,
		telemetry.FluentBitConfigPath, telemetry.Dir, agent.EnvRestartWindow, dataplane.DefaultPinPath, service.DefaultZonePath, agent.EnvDrain)
}
