// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0
//
// Service VIP forwarding for IPv6 TCP and UDP, attached with TCX at ingress
// on Pod veths, the Pod ENI and the node's default-route interface.
//
// A packet to a Service VIP is assigned a ready backend (deterministically,
// from a hash of its 5-tuple), destination-NATed to the backend and
// source-NATed to the node address with a port in 30000-32767, then handed
// back to the kernel's IPv6 forwarding. The backend's reply, which comes
// back to the node address, is reverse-NATed so that the client sees the
// VIP tuple. Two LRU maps keep a flow on its backend: forward (client tuple
// -> backend and NAT port) and reverse (backend tuple -> client and VIP).
//
// The program uses only helpers that are not restricted to GPL programs,
// so it is licensed like the rest of Podmin.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// The 6.1 uapi headers predate TCX; these are the kernel's values.
#define TCX_NEXT -1
#define TCX_PASS 0
#define TCX_DROP 2

#define MAX_SERVICES 65536
#define MAX_BACKENDS 65536
#define MAX_VIPS 65536
#define MAX_FLOWS 262144

#define NAT_PORT_MIN 30000
#define NAT_PORT_COUNT 2768 // 30000-32767
#define NAT_PROBES 32

// A TCP flow whose last FIN was acknowledged frees its NAT port at once;
// one that was reset, or closed without a seen final ACK, after a grace
// period for stray segments; an idle flow after its protocol's timeout.
#define CLOSED_GRACE_NS (1ULL * 1000000000ULL)
#define TCP_IDLE_NS (3600ULL * 1000000000ULL)
#define UDP_IDLE_NS (30ULL * 1000000000ULL)

#define FLOW_FIN_CLIENT 1
#define FLOW_FIN_BACKEND 2
#define FLOW_RST 4
#define FLOW_DONE 8 // both FINs seen and the last one acknowledged

// Counters, one slot each in the per-CPU stats array.
enum {
	STAT_NEW_FLOW,
	STAT_FORWARD,
	STAT_REVERSE,
	STAT_NO_BACKEND,
	STAT_NO_SERVICE,
	STAT_UNSUPPORTED,
	STAT_NAT_EXHAUSTED,
	STAT_NO_FLOW,
	STAT_MAX,
};

struct addr {
	__u32 w[4];
};

// The node's SNAT source address.
struct config {
	struct addr node;
};

struct service_key {
	struct addr vip;
	__u16 port; // network byte order
	__u8 proto;
	__u8 pad;
};

struct service {
	__u32 id;
	__u32 count; // ready backends, in slots 0..count-1
};

struct backend_key {
	__u32 service;
	__u32 slot;
};

struct backend {
	struct addr addr;
	__u16 port; // network byte order
	__u16 pad;
};

struct flow_key {
	struct addr src;
	struct addr dst;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

// Forward: client tuple (client -> VIP) to backend and NAT port.
struct forward {
	struct addr backend;
	__u16 bport;
	__u16 nat_port;
	__u32 pad;
};

// Reverse: backend tuple (backend -> node:nat_port) to client and VIP. It
// also carries the flow's liveness, which decides when its port is free.
struct reverse {
	struct addr client;
	struct addr vip;
	__u16 cport;
	__u16 vport;
	__u32 flags;
	__u64 seen; // bpf_ktime_get_ns of the last packet either way
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_VIPS);
	__type(key, struct addr);
	__type(value, __u32);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES);
	__type(key, struct service_key);
	__type(value, struct service);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BACKENDS);
	__type(key, struct backend_key);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct forward);
} forward_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct reverse);
} reverse_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

#define IP6_OFF ETH_HLEN
#define L4_OFF (ETH_HLEN + sizeof(struct ipv6hdr))
#define ADDRS_OFF (IP6_OFF + offsetof(struct ipv6hdr, saddr))

static __always_inline void count(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &stat);
	if (v)
		*v += 1;
}

static __always_inline int addr_eq(const struct addr *a, const struct addr *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2] && a->w[3] == b->w[3];
}

static __always_inline __u32 mix(__u32 h, __u32 v)
{
	h ^= v;
	h *= 0x01000193;
	h ^= h >> 15;
	return h;
}

// hash is a deterministic hash of a client tuple: the same flow picks the
// same backend on every node and after an agent restart.
static __always_inline __u32 hash(const struct flow_key *k, __u32 seed)
{
	__u32 h = 0x811c9dc5 ^ seed;
	h = mix(h, k->src.w[0]);
	h = mix(h, k->src.w[1]);
	h = mix(h, k->src.w[2]);
	h = mix(h, k->src.w[3]);
	h = mix(h, k->dst.w[0]);
	h = mix(h, k->dst.w[1]);
	h = mix(h, k->dst.w[2]);
	h = mix(h, k->dst.w[3]);
	h = mix(h, ((__u32)k->sport << 16) | k->dport);
	h = mix(h, k->proto);
	h ^= h >> 13;
	h *= 0x5bd1e995;
	h ^= h >> 15;
	return h;
}

// rewrite replaces both addresses and both ports of the packet and fixes
// the L4 checksum: the addresses are in the pseudo-header, the ports are
// not, which matters for CHECKSUM_PARTIAL packets from local sockets.
static __always_inline int rewrite(struct __sk_buff *skb, __u8 proto, const struct addr old[2],
				   const struct addr new[2], __u32 old_ports, __u32 new_ports)
{
	__u32 csum_off = L4_OFF + (proto == IPPROTO_TCP ? offsetof(struct tcphdr, check)
							  : offsetof(struct udphdr, check));
	__u64 pseudo = BPF_F_PSEUDO_HDR | (proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0);
	__s64 diff = bpf_csum_diff((__be32 *)old, 32, (__be32 *)new, 32, 0);

	if (diff < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, ADDRS_OFF, new, 32, 0))
		return -1;
	if (bpf_l4_csum_replace(skb, csum_off, 0, diff, pseudo))
		return -1;
	if (bpf_skb_store_bytes(skb, L4_OFF, &new_ports, 4, 0))
		return -1;
	if (bpf_l4_csum_replace(skb, csum_off, old_ports, new_ports,
				4 | (proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0)))
		return -1;
	return 0;
}

static __always_inline int expired(const struct reverse *r, __u8 proto, __u64 now)
{
	__u64 age = now > r->seen ? now - r->seen : 0;

	if (proto == IPPROTO_UDP)
		return age > UDP_IDLE_NS;
	if (r->flags & FLOW_DONE)
		return 1;
	if ((r->flags & FLOW_RST) ||
	    (r->flags & (FLOW_FIN_CLIENT | FLOW_FIN_BACKEND)) == (FLOW_FIN_CLIENT | FLOW_FIN_BACKEND))
		return age > CLOSED_GRACE_NS;
	return age > TCP_IDLE_NS;
}

// track follows a TCP flow's close from a segment sent by the side whose
// FIN flag is fin. An ACK sent after both FINs were seen acknowledges the
// last one, so neither side will send on this tuple again.
static __always_inline void track(struct reverse *r, struct tcphdr *th, __u32 fin)
{
	__u32 both = FLOW_FIN_CLIENT | FLOW_FIN_BACKEND;

	if ((r->flags & both) == both && th->ack)
		r->flags |= FLOW_DONE;
	if (th->rst)
		r->flags |= FLOW_RST;
	if (th->fin)
		r->flags |= fin;
}

// reverse_nat handles a backend's reply to the node address.
static __always_inline int reverse_nat(struct __sk_buff *skb, struct flow_key *k, struct tcphdr *th)
{
	struct reverse *r = bpf_map_lookup_elem(&reverse_flows, k);
	struct addr old[2], new[2];

	if (!r)
		return TCX_NEXT;
	if (th)
		track(r, th, FLOW_FIN_BACKEND);
	r->seen = bpf_ktime_get_ns();

	old[0] = k->src;
	old[1] = k->dst;
	new[0] = r->vip;
	new[1] = r->client;
	if (rewrite(skb, k->proto, old, new, ((__u32)k->dport << 16) | k->sport,
		    ((__u32)r->cport << 16) | r->vport))
		return TCX_DROP;
	count(STAT_REVERSE);
	return TCX_PASS;
}

// allocate picks a backend for a new flow and reserves a NAT port for it,
// probing at most NAT_PROBES ports. It returns 0 with fw filled in, or a
// stats slot explaining the drop.
static __always_inline int allocate(struct flow_key *k, const struct service *svc,
				    const struct addr *node, struct forward *fw, __u64 now)
{
	struct backend_key bk = {.service = svc->id};
	struct reverse rv = {};
	struct flow_key rk = {};
	struct backend *b;
	__u32 i;

	if (svc->count == 0)
		return STAT_NO_BACKEND;
	bk.slot = hash(k, 0) % svc->count;
	b = bpf_map_lookup_elem(&backends, &bk);
	if (!b)
		return STAT_NO_BACKEND;

	rk.src = b->addr;
	rk.dst = *node;
	rk.sport = b->port;
	rk.proto = k->proto;
	rv.client = k->src;
	rv.vip = k->dst;
	rv.cport = k->sport;
	rv.vport = k->dport;
	rv.seen = now;

	// Independent probes: linear probing would cluster around busy ports.
	for (i = 0; i < NAT_PROBES; i++) {
		__u16 port = NAT_PORT_MIN + hash(k, 0x9e3779b9 + i) % NAT_PORT_COUNT;
		struct reverse *cur;

		rk.dport = bpf_htons(port);
		cur = bpf_map_lookup_elem(&reverse_flows, &rk);
		if (cur && !expired(cur, k->proto, now))
			continue;
		if (bpf_map_update_elem(&reverse_flows, &rk, &rv, cur ? BPF_ANY : BPF_NOEXIST))
			continue;
		fw->backend = b->addr;
		fw->bport = b->port;
		fw->nat_port = rk.dport;
		if (bpf_map_update_elem(&forward_flows, k, fw, BPF_ANY))
			return STAT_NAT_EXHAUSTED;
		count(STAT_NEW_FLOW);
		return 0;
	}
	return STAT_NAT_EXHAUSTED;
}

// forward_nat handles a packet addressed to a VIP.
static __always_inline int forward_nat(struct __sk_buff *skb, struct flow_key *k, struct tcphdr *th)
{
	struct service_key sk = {.vip = k->dst, .port = k->dport, .proto = k->proto};
	__u32 zero = 0;
	struct forward *fw, nfw = {};
	struct reverse *r = NULL;
	struct flow_key rk = {};
	struct addr old[2], new[2];
	struct service *svc;
	struct config *cfg;
	__u64 now = bpf_ktime_get_ns();
	int syn = th && th->syn && !th->ack, err;

	cfg = bpf_map_lookup_elem(&config, &zero);
	svc = bpf_map_lookup_elem(&services, &sk);
	if (!cfg || !svc) {
		count(STAT_NO_SERVICE);
		return TCX_DROP;
	}

	// An existing flow stays on its backend, ready or not, as long as its
	// NAT port still belongs to it. A bare SYN on a closed flow is a new
	// connection reusing the client port and is balanced again.
	fw = bpf_map_lookup_elem(&forward_flows, k);
	if (fw) {
		rk.src = fw->backend;
		rk.dst = cfg->node;
		rk.sport = fw->bport;
		rk.dport = fw->nat_port;
		rk.proto = k->proto;
		r = bpf_map_lookup_elem(&reverse_flows, &rk);
		if (r && (!addr_eq(&r->client, &k->src) || r->cport != k->sport ||
			  !addr_eq(&r->vip, &k->dst) || r->vport != k->dport))
			r = NULL;
		if (r && syn && expired(r, k->proto, now))
			r = NULL;
	}
	if (!r) {
		// Only a SYN starts a TCP flow: a stray segment (say, the last
		// ACK of a flow whose port was reused) must not take a port.
		if (th && !syn) {
			count(STAT_NO_FLOW);
			return TCX_DROP;
		}
		err = allocate(k, svc, &cfg->node, &nfw, now);
		if (err) {
			count(err);
			return TCX_DROP;
		}
		fw = &nfw;
	} else {
		if (syn)
			r->flags = 0;
		if (th)
			track(r, th, FLOW_FIN_CLIENT);
		r->seen = now;
	}

	old[0] = k->src;
	old[1] = k->dst;
	new[0] = cfg->node;
	new[1] = fw->backend;
	if (rewrite(skb, k->proto, old, new, ((__u32)k->dport << 16) | k->sport,
		    ((__u32)fw->bport << 16) | fw->nat_port))
		return TCX_DROP;
	count(STAT_FORWARD);
	return TCX_PASS;
}

SEC("tcx/ingress")
int podmin_vip(struct __sk_buff *skb)
{
	void *data, *data_end;
	struct ipv6hdr *ip6;
	struct tcphdr *th = NULL;
	struct flow_key k = {};
	__u32 is_vip;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TCX_NEXT;
	// The headers the program reads are usually linear already; pull them
	// only when they are not (TCP options are never read).
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (data + L4_OFF + sizeof(struct tcphdr) > data_end) {
		if (bpf_skb_pull_data(skb, L4_OFF + sizeof(struct tcphdr)) &&
		    bpf_skb_pull_data(skb, L4_OFF + sizeof(struct udphdr)))
			bpf_skb_pull_data(skb, L4_OFF);
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
	}
	ip6 = data + IP6_OFF;
	if ((void *)(ip6 + 1) > data_end)
		return TCX_NEXT;

	__builtin_memcpy(&k.src, &ip6->saddr, sizeof(k.src));
	__builtin_memcpy(&k.dst, &ip6->daddr, sizeof(k.dst));
	is_vip = bpf_map_lookup_elem(&vips, &k.dst) != NULL;

	// Only an immediate TCP or UDP header is parsed: fragments and
	// extension-header chains to a VIP are refused, anything else is not
	// Service traffic.
	k.proto = ip6->nexthdr;
	if (k.proto == IPPROTO_TCP) {
		th = data + L4_OFF;
		if ((void *)(th + 1) > data_end)
			goto unsupported;
		k.sport = th->source;
		k.dport = th->dest;
	} else if (k.proto == IPPROTO_UDP) {
		struct udphdr *uh = data + L4_OFF;

		if ((void *)(uh + 1) > data_end)
			goto unsupported;
		k.sport = uh->source;
		k.dport = uh->dest;
	} else {
		goto unsupported;
	}

	if (is_vip)
		return forward_nat(skb, &k, th);
	return reverse_nat(skb, &k, th);

unsupported:
	if (!is_vip)
		return TCX_NEXT;
	count(STAT_UNSUPPORTED);
	return TCX_DROP;
}

char __license[] SEC("license") = "Apache-2.0";
