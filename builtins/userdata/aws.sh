#!/bin/bash
# Podmin node bootstrap for AWS, rendered by builtins/userdata. Comments and
# blank lines are stripped before the script is gzipped into user-data, so
# nothing below a "#" reaches the instance. Every step is idempotent: a
# reboot or a re-run converges on the same node.
set -euo pipefail
umask 022

cluster='{{.Cluster}}'
nodegroup='{{.NodeGroup}}'
bucket='{{.Bucket}}'
region='{{.Region}}'
arch='{{.Arch}}'
pause_image='{{.PauseImage}}'
otel_logs='{{.OTelLogs}}'
# One row per dependency of this architecture: canonical|object|digest.
dependencies=(
{{- range .Rows}}
  '{{.}}'
{{- end}}
)

downloads=/opt/podmin/downloads
deps=/opt/podmin/dependencies
containerd_sock=/run/podmin/containerd/containerd.sock
s3_endpoint="https://s3.dualstack.${region}.amazonaws.com"
imds_base='http://[fd00:ec2::254]/latest'

log() { printf 'podmin-bootstrap: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# Local IMDS (IMDSv2 token) over IPv6.
imds_token=$(curl -fsS --retry 10 --retry-connrefused -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' "$imds_base/api/token")
imds() { curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: $imds_token" "$imds_base/meta-data/$1"; }

# Packages, then the SSM Agent from AWS's regional bucket over the
# dual-stack endpoint, so Systems Manager access works even if later steps fail.
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends awscli bzip2 ca-certificates conntrack curl iproute2 nftables tar
ssm_deb=/opt/podmin/amazon-ssm-agent.deb
mkdir -p /opt/podmin /etc/amazon/ssm
curl -fsS --retry 5 -o "$ssm_deb" "https://s3.dualstack.${region}.amazonaws.com/amazon-ssm-${region}/latest/debian_${arch}/amazon-ssm-agent.deb"
dpkg -i "$ssm_deb"
cat >/etc/amazon/ssm/amazon-ssm-agent.json <<JSON
{"Agent": {"Region": "${region}", "UseDualStackEndpoint": true}}
JSON
systemctl enable amazon-ssm-agent
systemctl restart amazon-ssm-agent

# One filtered, architecture-specific sync through the S3 gateway
# endpoint; AWS CLI transfers the files concurrently.
mkdir -p "$downloads" "$deps"
includes=()
for row in "${dependencies[@]}"; do
  IFS='|' read -r name object digest <<<"$row"
  includes+=(--include "${object#dependencies/}")
done
aws configure set default.s3.max_concurrent_requests 16
aws s3 sync "s3://${bucket}/dependencies/" "$downloads/" --exclude '*' "${includes[@]}" \
  --region "$region" --endpoint-url "$s3_endpoint" --only-show-errors

# Verify every file against its recorded digest, then move it to its
# canonical path.
for row in "${dependencies[@]}"; do
  IFS='|' read -r name object digest <<<"$row"
  file="$downloads/${object#dependencies/}"
  want="${digest#*:}"
  case "${digest%%:*}" in
    sha256) got=$(sha256sum "$file") ;;
    sha512) got=$(sha512sum "$file") ;;
    *) die "unsupported digest $digest for $object" ;;
  esac
  [[ "${got%% *}" == "$want" ]] || die "digest mismatch for $object"
  mv -f "$file" "$deps/$name"
done

# Installation. containerd comes without runc and without its runc shim:
# gVisor is the only runtime.
tar -xzf "$deps/containerd.tar.gz" -C /usr/local --no-same-owner --exclude 'bin/containerd-shim-runc-v*' bin/
rm -f /usr/local/bin/runc /usr/local/sbin/runc
tar -xjf "$deps/gvisor.tar.bz2" -C /usr/local/bin --no-same-owner
mkdir -p /opt/cni/bin
tar -xzf "$deps/cni-plugins.tgz" -C /opt/cni/bin --no-same-owner
install -m 0755 "$deps/kubelet" /usr/local/bin/kubelet
tar -xzf "$deps/crictl.tar.gz" -C /usr/local/bin --no-same-owner crictl
tar -xzf "$deps/coredns.tgz" -C /usr/local/bin --no-same-owner coredns
install -m 0755 "$deps/podmin-agent" /usr/local/bin/podmin-agent
if [[ "$otel_logs" == true ]]; then
  dpkg -i "$deps/libpq5.deb"
  dpkg -i "$deps/fluent-bit.deb"
fi

# Users and directories.
id -u coredns >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin coredns
mkdir -p /etc/podmin/manifests /etc/containerd/certs.d/registry.podmin.internal /etc/cni/net.d \
  /etc/kubernetes /etc/coredns /var/lib/kubelet/pods-api /run/podmin/containerd

# Node address from the primary ENI; the Pod ENI is the secondary one.
primary_mac=$(imds mac)
node_ip=$(imds "network/interfaces/macs/${primary_mac}/ipv6s" | head -n 1)
[[ -n "$node_ip" ]] || die "the primary ENI has no IPv6 address"
secondary_mac=''
for mac in $(imds network/interfaces/macs/); do
  mac="${mac%/}"
  if [[ "$(imds "network/interfaces/macs/${mac}/device-number")" == 1 ]]; then
    secondary_mac="$mac"
  fi
done
[[ -n "$secondary_mac" ]] || die "no secondary ENI"
link_of() {
  local dev
  for dev in /sys/class/net/*; do
    if [[ "$(cat "$dev/address")" == "$1" ]]; then
      basename "$dev"
      return 0
    fi
  done
  return 1
}
primary_if=$(link_of "$primary_mac") || die "no link for $primary_mac"
pod_if=$(link_of "$secondary_mac") || die "no link for $secondary_mac"
pod_eni=$(imds "network/interfaces/macs/${secondary_mac}/interface-id")
pod_eni_ip=$(imds "network/interfaces/macs/${secondary_mac}/ipv6s" | head -n 1)
[[ -n "$pod_eni_ip" ]] || die "the secondary ENI has no launch-time IPv6 address"
ip link set "$pod_if" up
ip -6 addr replace "${pod_eni_ip}/128" dev "$pod_if"

# Reuse the delegated /80 or assign exactly one: the ordinary address
# exists already, so AWS's address-before-prefix order holds.
prefixes() { imds "network/interfaces/macs/${secondary_mac}/ipv6-prefix" 2>/dev/null || true; }
pod_prefix=$(prefixes)
if [[ -z "$pod_prefix" ]]; then
  aws ec2 assign-ipv6-addresses --region "$region" --network-interface-id "$pod_eni" --ipv6-prefix-count 1 >/dev/null
  for _ in $(seq 60); do
    pod_prefix=$(prefixes)
    [[ -n "$pod_prefix" ]] && break
    sleep 2
  done
fi
[[ $(printf '%s\n' "$pod_prefix" | grep -c /) -eq 1 ]] || die "want exactly one delegated prefix on $pod_eni, got: $pod_prefix"
[[ "$pod_prefix" == */80 ]] || die "delegated prefix $pod_prefix is not a /80"
gateway=$(ip -6 route show default dev "$primary_if" | awk '{print $3; exit}')
[[ -n "$gateway" ]] || gateway=fe80::1

cat >/etc/podmin/node.env <<ENV
PODMIN_NODE_IP=${node_ip}
PODMIN_POD_PREFIX=${pod_prefix}
PODMIN_POD_IF=${pod_if}
PODMIN_GATEWAY=${gateway}
ENV

# Runtime configuration.
cat >/etc/containerd/config.toml <<TOML
version = 3
root = '/var/lib/containerd'
state = '/run/podmin/containerd/state'
[grpc]
  address = '${containerd_sock}'
[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '${pause_image}'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '/etc/containerd/certs.d'
[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/opt/cni/bin']
    conf_dir = '/etc/cni/net.d'
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runsc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = 'io.containerd.runsc.v1'
TOML
cat >/etc/containerd/certs.d/registry.podmin.internal/hosts.toml <<TOML
server = 'http://127.0.0.1:5000'
[host.'http://127.0.0.1:5000']
  capabilities = ['pull', 'resolve']
TOML
cat >/etc/crictl.yaml <<YAML
runtime-endpoint: unix://${containerd_sock}
image-endpoint: unix://${containerd_sock}
timeout: 10
YAML
cat >/etc/cni/net.d/10-podmin.conflist <<JSON
{
  "cniVersion": "1.0.0",
  "name": "podmin",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${pod_prefix}"}]],
        "routes": [{"dst": "::/0"}]
      }
    }
  ]
}
JSON
cat >/etc/kubernetes/kubelet.yaml <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/podmin/manifests
containerRuntimeEndpoint: unix://${containerd_sock}
cgroupDriver: systemd
address: '::1'
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS:
  - '${node_ip}'
resolvConf: /etc/resolv.conf
featureGates:
  {{.PodsAPIGate}}: true
kubeReserved:
  cpu: 100m
  memory: 128Mi
systemReserved:
  cpu: 100m
  memory: 96Mi
enforceNodeAllocatable:
  - pods
YAML
cat >/etc/coredns/Corefile <<COREFILE
svc.cluster.local:53 {
  bind ${node_ip}
  forward . 127.0.0.1:1053
}
.:53 {
  bind ${node_ip}
  forward . /etc/resolv.conf
  cache 30
}
COREFILE
cat >/etc/podmin/agent.env <<ENV
PODMIN_ARGS=--provider aws --bucket ${bucket} --region ${region} --cluster ${cluster} --nodegroup ${nodegroup} --ipv6-prefix ${pod_prefix}
ENV
cat >/usr/local/sbin/podmin-pod-network <<'SH'
#!/bin/bash
set -euo pipefail
. /etc/podmin/node.env
sysctl -qw net.ipv6.conf.all.forwarding=1
ip link set "$PODMIN_POD_IF" up
ip -6 route replace default via "$PODMIN_GATEWAY" dev "$PODMIN_POD_IF" table 80
ip -6 rule del from "$PODMIN_POD_PREFIX" table 80 2>/dev/null || true
ip -6 rule add from "$PODMIN_POD_PREFIX" table 80 priority 800
SH
chmod 0755 /usr/local/sbin/podmin-pod-network

# systemd units.
cat >/etc/systemd/system/containerd.service <<UNIT
[Unit]
Description=containerd for Podmin (gVisor runtime, no runc)
After=network-online.target
Wants=network-online.target
[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd --config /etc/containerd/config.toml
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNOFILE=infinity
[Install]
WantedBy=multi-user.target
UNIT
cat >/etc/systemd/system/podmin-pod-network.service <<UNIT
[Unit]
Description=Podmin Pod network: route delegated-prefix sources through the Pod ENI
After=network-online.target
Wants=network-online.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/podmin-pod-network
[Install]
WantedBy=multi-user.target
UNIT
cat >/etc/systemd/system/podmin-agent.service <<UNIT
[Unit]
Description=podmin-agent
After=network-online.target podmin-pod-network.service
Wants=network-online.target
[Service]
EnvironmentFile=/etc/podmin/agent.env
ExecStart=/usr/local/bin/podmin-agent \$PODMIN_ARGS
Restart=always
RestartSec=5
[Install]
WantedBy=multi-user.target
UNIT
cat >/etc/systemd/system/coredns.service <<UNIT
[Unit]
Description=CoreDNS for Podmin Services
After=network-online.target podmin-agent.service
Wants=network-online.target
[Service]
User=coredns
AmbientCapabilities=CAP_NET_BIND_SERVICE
ExecStart=/usr/local/bin/coredns -conf /etc/coredns/Corefile
Restart=always
RestartSec=5
[Install]
WantedBy=multi-user.target
UNIT
cat >/etc/systemd/system/kubelet.service <<UNIT
[Unit]
Description=kubelet (static Pods only)
After=containerd.service podmin-pod-network.service podmin-agent.service coredns.service
Requires=containerd.service podmin-pod-network.service
Wants=podmin-agent.service coredns.service
[Service]
ExecStart=/usr/local/bin/kubelet --config /etc/kubernetes/kubelet.yaml --hostname-override ${node_ip} --node-ip ${node_ip}
Restart=always
RestartSec=5
[Install]
WantedBy=multi-user.target
UNIT

systemctl daemon-reload
systemctl enable --now containerd.service podmin-pod-network.service
systemctl enable --now podmin-agent.service coredns.service
systemctl enable --now kubelet.service
if [[ "$otel_logs" == true ]]; then
  systemctl enable --now fluent-bit.service
fi
log "node ${node_ip} of ${cluster}/${nodegroup} (${arch}) bootstrapped with Pod prefix ${pod_prefix}"
