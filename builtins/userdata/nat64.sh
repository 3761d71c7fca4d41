#!/bin/bash
# Podmin NAT64 instance bootstrap for AWS, rendered by builtins/userdata.
# Order matters: the SSM Agent first, then everything slow (packages, Jool
# modules, validation through the management ENI) before the brief window
# in which the stable data ENI moves from the previous instance to this
# one. A failure abandons the lifecycle hook and releases a claimed ENI.
set -euo pipefail
umask 022

cluster='{{.Cluster}}'
bucket='{{.Bucket}}'
region='{{.Region}}'
arch='{{.Arch}}'
generation='{{.Generation}}'
stable_eni='{{.StableENI}}'
asg='{{.AutoScalingGroup}}'
hook='{{.LifecycleHook}}'
jool_kernel='{{.Kernel}}'
jool_object='{{.JoolObject}}'
jool_digest='{{.JoolDigest}}'
check_host='{{.CheckHost}}'
pool6='64:ff9b::/96'
workload_subnets=(
{{- range .WorkloadSubnets}}
  '{{.}}'
{{- end}}
)

s3_endpoint="https://s3.dualstack.${region}.amazonaws.com"
imds_base='http://[fd00:ec2::254]/latest'
claimed=''

log() { printf 'podmin-nat64: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

imds_token=$(curl -fsS --retry 10 --retry-connrefused -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' "$imds_base/api/token")
imds() { curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: $imds_token" "$imds_base/meta-data/$1"; }
instance_id=$(imds instance-id)

# On any failure: abandon this candidate and release an ENI it claimed, so
# the next replacement can take it.
finish() {
  local status=$?
  if [[ $status -ne 0 ]]; then
    log "bootstrap failed (status $status): abandoning"
    if [[ -n "$claimed" ]]; then
      aws ec2 detach-network-interface --region "$region" --attachment-id "$claimed" --force || true
    fi
    aws autoscaling complete-lifecycle-action --region "$region" --auto-scaling-group-name "$asg" \
      --lifecycle-hook-name "$hook" --instance-id "$instance_id" --lifecycle-action-result ABANDON || true
  fi
}
trap finish EXIT

# SSM Agent first, over the dual-stack endpoint.
export DEBIAN_FRONTEND=noninteractive
mkdir -p /opt/podmin /etc/amazon/ssm
ssm_deb=/opt/podmin/amazon-ssm-agent.deb
curl -fsS --retry 5 -o "$ssm_deb" "https://s3.dualstack.${region}.amazonaws.com/amazon-ssm-${region}/latest/debian_${arch}/amazon-ssm-agent.deb"
dpkg -i "$ssm_deb"
cat >/etc/amazon/ssm/amazon-ssm-agent.json <<JSON
{"Agent": {"Region": "${region}", "UseDualStackEndpoint": true}}
JSON
systemctl enable amazon-ssm-agent
systemctl restart amazon-ssm-agent

apt-get update -q
apt-get install -y -q --no-install-recommends awscli ca-certificates curl iproute2 kmod nftables tar

# The mirrored Jool archive for this AMI's exact kernel, verified.
[[ "$(uname -r)" == "$jool_kernel" ]] || die "kernel $(uname -r) is not the AMI's $jool_kernel the Jool modules were built for"
archive=/opt/podmin/jool.tar.gz
aws s3 cp "s3://${bucket}/${jool_object}" "$archive" --region "$region" --endpoint-url "$s3_endpoint" --only-show-errors
case "${jool_digest%%:*}" in
  sha256) got=$(sha256sum "$archive") ;;
  sha512) got=$(sha512sum "$archive") ;;
  *) die "unsupported digest $jool_digest" ;;
esac
[[ "${got%% *}" == "${jool_digest#*:}" ]] || die "digest mismatch for $jool_object"
tar -xzf "$archive" -C / --no-same-owner
depmod -a "$jool_kernel"
modprobe jool

# Forwarding, Jool in Netfilter mode, and the firewall: only workload
# subnets may be translated, and never towards non-global IPv4 (private,
# shared, loopback, link-local including instance metadata, multicast,
# reserved).
sysctl -qw net.ipv4.conf.all.forwarding=1
sysctl -qw net.ipv6.conf.all.forwarding=1
jool instance display 2>/dev/null | grep -qw podmin || jool instance add podmin --netfilter --pool6 "$pool6"
sources=$(IFS=,; printf '%s' "${workload_subnets[*]}")
cat >/etc/podmin-nat64.nft <<NFT
table inet podmin_nat64
delete table inet podmin_nat64
table inet podmin_nat64 {
  set workload {
    type ipv6_addr
    flags interval
    elements = { ${sources} }
  }
  set nonglobal {
    type ipv6_addr
    flags interval
    elements = { 64:ff9b::/104, 64:ff9b::a00:0/104, 64:ff9b::6440:0/106, 64:ff9b::7f00:0/104, 64:ff9b::a9fe:0/112, 64:ff9b::ac10:0/108, 64:ff9b::c000:0/120, 64:ff9b::c000:200/120, 64:ff9b::c0a8:0/112, 64:ff9b::c612:0/111, 64:ff9b::c633:6400/120, 64:ff9b::cb00:7100/120, 64:ff9b::e000:0/99 }
  }
  chain prerouting {
    type filter hook prerouting priority raw; policy accept;
    ip6 daddr ${pool6} ip6 saddr != @workload drop
    ip6 daddr @nonglobal drop
  }
}
NFT
nft -f /etc/podmin-nat64.nft

# Validate through the management ENI before touching the stable ENI.
jool instance display | grep -qw podmin || die "Jool instance missing"
[[ "$(sysctl -n net.ipv6.conf.all.forwarding)" == 1 ]] || die "IPv6 forwarding is off"
[[ "$(sysctl -n net.ipv4.conf.all.forwarding)" == 1 ]] || die "IPv4 forwarding is off"
nft list chain inet podmin_nat64 prerouting >/dev/null || die "NAT64 firewall missing"
aws ec2 describe-network-interfaces --region "$region" --network-interface-ids "$stable_eni" --query 'NetworkInterfaces[0].Status' --output text >/dev/null

# Generation handoff: the newest launch generation wins once; an older
# instance (for example after a reboot) never reclaims the ENI.
eni_generation=$(aws ec2 describe-network-interfaces --region "$region" --network-interface-ids "$stable_eni" \
  --query "NetworkInterfaces[0].TagSet[?Key=='podmin:nat64-generation'].Value | [0]" --output text)
if [[ "$eni_generation" != None && "$eni_generation" -gt "$generation" ]]; then
  die "stable ENI $stable_eni belongs to newer generation $eni_generation"
fi
aws ec2 create-tags --region "$region" --resources "$stable_eni" --tags "Key=podmin:nat64-generation,Value=${generation}"
attachment=$(aws ec2 describe-network-interfaces --region "$region" --network-interface-ids "$stable_eni" \
  --query 'NetworkInterfaces[0].Attachment.[AttachmentId,InstanceId]' --output text)
read -r old_attachment old_instance <<<"$attachment"
if [[ "$old_attachment" != None && "$old_instance" != "$instance_id" ]]; then
  aws ec2 detach-network-interface --region "$region" --attachment-id "$old_attachment" --force
  aws ec2 wait network-interface-available --region "$region" --network-interface-ids "$stable_eni"
fi
if [[ "$old_instance" != "$instance_id" ]]; then
  claimed=$(aws ec2 attach-network-interface --region "$region" --network-interface-id "$stable_eni" \
    --instance-id "$instance_id" --device-index 1 --query AttachmentId --output text)
else
  claimed="$old_attachment"
fi

# Configure the stable ENI locally.
stable_mac=$(aws ec2 describe-network-interfaces --region "$region" --network-interface-ids "$stable_eni" \
  --query 'NetworkInterfaces[0].MacAddress' --output text)
stable_if=''
for _ in $(seq 60); do
  for dev in /sys/class/net/*; do
    if [[ "$(cat "$dev/address")" == "$stable_mac" ]]; then
      stable_if=$(basename "$dev")
    fi
  done
  [[ -n "$stable_if" ]] && break
  sleep 2
done
[[ -n "$stable_if" ]] || die "stable ENI $stable_eni did not appear"
v4=$(imds "network/interfaces/macs/${stable_mac}/local-ipv4s" | head -n 1)
v4_cidr=$(imds "network/interfaces/macs/${stable_mac}/subnet-ipv4-cidr-block")
v6=$(imds "network/interfaces/macs/${stable_mac}/ipv6s" | head -n 1)
ip link set "$stable_if" up
ip addr replace "${v4}/${v4_cidr#*/}" dev "$stable_if"
ip -6 addr replace "${v6}/128" dev "$stable_if"
v4_net=${v4_cidr%/*}
ip route replace default via "${v4_net%.*}.$(( ${v4_net##*.} + 1 ))" dev "$stable_if"

# A real translated IPv6-only TLS request from a client namespace that
# reaches the IPv4 internet only through Jool.
ns=podmin-nat64-check
ip netns del "$ns" 2>/dev/null || true
ip netns add "$ns"
ip link add podmin-chk0 type veth peer name podmin-chk1 netns "$ns"
ip -6 addr add fd64:6f64::1/64 dev podmin-chk0 nodad
ip link set podmin-chk0 up
ip -n "$ns" -6 addr add fd64:6f64::2/64 dev podmin-chk1 nodad
ip -n "$ns" link set podmin-chk1 up
ip -n "$ns" -6 route add "$pool6" via fd64:6f64::1
nft add element inet podmin_nat64 workload '{ fd64:6f64::2 }'
check_v4=$(getent ahostsv4 "$check_host" | awk '{print $1; exit}')
IFS=. read -r o1 o2 o3 o4 <<<"$check_v4"
check_v6=$(printf '64:ff9b::%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
ip netns exec "$ns" curl -6 -fsS -o /dev/null --max-time 20 --resolve "${check_host}:443:[${check_v6}]" "https://${check_host}/"
nft delete element inet podmin_nat64 workload '{ fd64:6f64::2 }'
ip netns del "$ns"

aws autoscaling complete-lifecycle-action --region "$region" --auto-scaling-group-name "$asg" \
  --lifecycle-hook-name "$hook" --instance-id "$instance_id" --lifecycle-action-result CONTINUE
log "NAT64 generation ${generation} of ${cluster} serving on ${stable_eni}"
