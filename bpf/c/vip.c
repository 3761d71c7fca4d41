// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0
//
// Service VIP forwarding for IPv6 TCP and UDP, attached with TCX at ingress
// on Pod veths, the Pod ENI, the node's default-route interface and its
// loopback device.
//
// A packet to a Service VIP is assigned a ready backend (deterministically,
// from a hash of its 5-tuple), destination-NATed to the backend and
// source-NATed to the node address with a port in 30000-32767, then handed
// back to the kernel's IPv6 forwarding. The backend's reply, which comes
// back to the node address, is reverse-NATed so that the client sees the
// VIP tuple. Two LRU maps keep a flow on its backend: forward (client tuple
// -> backend and NAT port) and reverse (backend tuple -> client and VIP).
// Only the flow's own packets follow them: a new connection on a client
// tuple a flow used before (a reused source port) is placed as a new flow
// is, on the Service's backends of that moment (see forward_nat).
// ICMPv6 errors about a NATed packet are translated the same way, so path
// MTU discovery and unreachable errors reach the side that sent it.
//
// A NAT port is the backend's view of the connection, so it is not handed
// to another client while the backend may still hold the old connection:
// see reclaimable.
//
// The maps may outlive the agent that fills them (they are pinned), so a
// new flow also needs the agent's lease in config to be live: a dataplane
// left without an agent stops assigning backends it can no longer vouch
// for once the lease window has passed.
//
// The program uses only helpers that are not restricted to GPL programs,
// so it is licensed like the rest of Podmin.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// The 6.1 uapi headers predate TCX and BPF_F_IPV6; these are the kernel's
// values.
#define TCX_NEXT -1
#define TCX_PASS 0
#define TCX_DROP 2
#define CSUM_F_IPV6 (1ULL << 7)

#define LOOPBACK_IFINDEX 1

// Map sizes are the spec's limits; the loader lowers them to the
// configured ones.
#define MAX_SERVICES 65536
#define MAX_BACKENDS 65536
#define MAX_VIPS 65536
#define MAX_FLOWS 262144
#define MAX_EXHAUSTED 256

#define NAT_PORT_MIN 30000
#define NAT_PORT_COUNT 2768 // 30000-32767
#define NAT_PROBES 32

// How long a NAT port stays with a flow that went quiet or closed:
// TIME_WAIT_NS covers the backend's TIME_WAIT (60 s on Linux) plus the
// lateness of the kernel timer that ends it (up to 1/8 of the delay);
// CLOSED_GRACE_NS is for stray segments after a reset or a close that
// left no TIME_WAIT on the backend.
#define TIME_WAIT_NS (68ULL * 1000000000ULL)
#define CLOSED_GRACE_NS (1ULL * 1000000000ULL)
#define TCP_IDLE_NS (3600ULL * 1000000000ULL)
#define UDP_IDLE_NS (30ULL * 1000000000ULL)

// Flow state: flags in the low byte of reverse.state, a claim generation
// above them. The state word changes only with atomic operations.
#define FLOW_FIN_CLIENT 0x01
#define FLOW_FIN_BACKEND 0x02
#define FLOW_RST 0x04
#define FLOW_DONE 0x08 // both FINs seen and the last one acknowledged
#define FLOW_BACKEND_FIRST 0x10 // the backend's FIN preceded the client's: it holds TIME_WAIT
#define FLOW_FIN_SEQ 0x20 // fin_seq is the backend's rcv_nxt after the client's FIN
#define FLOW_FIN_TS 0x40 // fin_tsval is the newest timestamp the client sent since its FIN
#define FLOW_CLAIMED 0x80 // being handed to a new flow
#define FLOW_FLAGS 0xff
#define FLOW_BOTH_FINS (FLOW_FIN_CLIENT | FLOW_FIN_BACKEND)
#define FLOW_TIME_WAIT (FLOW_FIN_CLIENT | FLOW_BACKEND_FIRST)

// Set by the loader: the kernel accepts BPF_F_IPV6 in bpf_l4_csum_replace.
volatile const __u8 csum_ipv6 = 0;

// Counters, one slot each in the per-CPU stats array.
enum {
	STAT_NEW_FLOW,
	STAT_FORWARD,
	STAT_REVERSE,
	STAT_REPAIRED,
	STAT_ICMP_TRANSLATED,
	STAT_NO_BACKEND,
	STAT_NO_SERVICE,
	STAT_NAT_EXHAUSTED,
	STAT_NO_FLOW,
	STAT_FRAGMENT,
	STAT_EXTENSION_HEADER,
	STAT_PROTOCOL,
	STAT_TRUNCATED,
	STAT_ICMP_NO_FLOW,
	STAT_REWRITE_FAILED,
	STAT_LEASE_EXPIRED,
	STAT_MAX,
};

struct addr {
	__u32 w[4];
};

// The node's SNAT source address, and until when the backends in the maps
// may take new flows: the agent renews this lease (a bpf_ktime_get_ns
// deadline) while a leader confirms its Service snapshot. Past it, as when
// the agent is gone and the maps outlive it, every Service refuses new
// flows; flows already open keep their backends.
struct config {
	struct addr node;
	__u64 lease;
};

struct service_key {
	struct addr vip;
	__u16 port; // network byte order
	__u8 proto;
	__u8 pad;
};

// Service and backend entries carry a lock: the agent rewrites them in
// place under it (BPF_F_LOCK), and the program reads them under it. A
// plain update would put the new value in a fresh element and recycle the
// old one for the next update, of another key, while a CPU may still be
// reading it: that CPU would send a new flow to another Service's backend.
struct service {
	__u32 id;
	__u32 count; // ready backends, in slots 0..count-1
	struct bpf_spin_lock lock;
};

struct backend_key {
	__u32 service;
	__u32 slot;
};

struct backend {
	struct addr addr;
	__u16 port; // network byte order
	__u16 pad;
	struct bpf_spin_lock lock;
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
	__u32 state; // FLOW_* flags and claim generation
	__u64 seen; // bpf_ktime_get_ns of the last packet either way
	__u32 fin_seq; // host byte order
	__u32 fin_tsval; // host byte order
	__u32 ifindex; // where the client's packets come in
	__u32 syn_seq; // host byte order: the ISN of the connection's opening SYN
};

// A backend port that ran out of NAT ports, for the agent's report.
struct exhausted_key {
	struct addr backend;
	__u16 port; // network byte order
	__u8 proto;
	__u8 pad;
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
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_EXHAUSTED);
	__type(key, struct exhausted_key);
	__type(value, __u64);
} exhausted SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

#define IP6_OFF ETH_HLEN
#define L4_OFF (ETH_HLEN + sizeof(struct ipv6hdr))
#define ADDRS_OFF (IP6_OFF + offsetof(struct ipv6hdr, saddr))
// An ICMPv6 error: its 8-byte header, then the packet it is about.
#define INNER_OFF (L4_OFF + 8)
#define INNER_ADDRS_OFF (INNER_OFF + offsetof(struct ipv6hdr, saddr))
#define INNER_L4_OFF (INNER_OFF + sizeof(struct ipv6hdr))

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

// l4_csum adds diff (a bpf_csum_diff result) to the L4 checksum at off.
// IPv6 has no header checksum that absorbs an address change, so a
// CHECKSUM_COMPLETE packet's skb->csum must stay as it is; kernels that
// predate BPF_F_IPV6 adjust it for pseudo-header changes as if for IPv4,
// which is undone here.
static __always_inline int l4_csum(struct __sk_buff *skb, __u32 off, __s64 diff, __u64 flags)
{
	if (csum_ipv6)
		flags |= CSUM_F_IPV6;
	if (bpf_l4_csum_replace(skb, off, 0, diff, flags))
		return -1;
	if (!csum_ipv6 && (flags & BPF_F_PSEUDO_HDR))
		bpf_csum_update(skb, diff);
	return 0;
}

// l4_csum_word replaces a 4-byte word outside the pseudo-header in the L4
// checksum at off.
static __always_inline int l4_csum_word(struct __sk_buff *skb, __u32 off, __u32 from, __u32 to, __u64 flags)
{
	if (csum_ipv6)
		flags |= CSUM_F_IPV6;
	return bpf_l4_csum_replace(skb, off, from, to, flags | 4);
}

// rewrite replaces both addresses and both ports of the packet and fixes
// the L4 checksum: the addresses are in the pseudo-header, the ports are
// not, which matters for CHECKSUM_PARTIAL packets from local sockets.
static __always_inline int rewrite(struct __sk_buff *skb, __u8 proto, const struct addr old[2],
				   const struct addr new[2], __u32 old_ports, __u32 new_ports)
{
	__u32 csum_off = L4_OFF + (proto == IPPROTO_TCP ? offsetof(struct tcphdr, check)
							  : offsetof(struct udphdr, check));
	__u64 mangled = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	__s64 diff = bpf_csum_diff((__be32 *)old, 32, (__be32 *)new, 32, 0);

	if (diff < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, ADDRS_OFF, new, 32, 0))
		return -1;
	if (l4_csum(skb, csum_off, diff, BPF_F_PSEUDO_HDR | mangled))
		return -1;
	if (bpf_skb_store_bytes(skb, L4_OFF, &new_ports, 4, 0))
		return -1;
	if (l4_csum_word(skb, csum_off, old_ports, new_ports, mangled))
		return -1;
	return 0;
}

// deliver hands a rewritten packet for a client on. One that arrived on
// the loopback device (an error the node raised itself, or a reply from
// the node's own address) is not forwarded from there, so it is sent out
// of the interface the client's packets come in on.
static __always_inline int deliver(struct __sk_buff *skb, const struct reverse *r)
{
	if (skb->ifindex != LOOPBACK_IFINDEX)
		return TCX_PASS;
	return bpf_redirect_neigh(r->ifindex, NULL, 0, 0);
}

// A TCP segment's fields that decide a NAT port's fate.
struct segment {
	__u32 seq; // host byte order
	__u32 end; // seq + length, SYN and FIN counted
	__u32 tsval; // host byte order, when has_ts
	__u8 has_ts;
};

// A walk over TCP options (bpf_loop, so that the verifier checks one step
// rather than every iteration of every path).
struct options {
	__u8 o[40];
	__u32 len;
	__u32 i;
	__u64 ts;
};

static long option_step(__u32 n, struct options *c)
{
	__u32 i = c->i, len = c->len;
	__u8 kind, olen;

	if (i + 1 >= len || i >= 38)
		return 1;
	kind = c->o[i];
	if (kind == 0) // end of options
		return 1;
	if (kind == 1) { // no-op
		c->i = i + 1;
		return 0;
	}
	olen = c->o[i + 1];
	if (kind == 8) {
		if (olen == 10 && i + 10 <= len && i <= 30)
			c->ts = (1ULL << 32) | ((__u32)c->o[i + 2] << 24) | ((__u32)c->o[i + 3] << 16) |
				((__u32)c->o[i + 4] << 8) | c->o[i + 5];
		return 1;
	}
	if (olen < 2)
		return 1;
	c->i = i + olen;
	return 0;
}

// tcp_tsval returns the timestamp value (host byte order) of the TCP
// header at L4_OFF, which is doff bytes long, with bit 32 set; 0 when it
// has none.
static __always_inline __u64 tcp_tsval(struct __sk_buff *skb, __u32 doff)
{
	struct options c = {};

	if (doff <= sizeof(struct tcphdr) || doff > 60)
		return 0;
	c.len = doff - sizeof(struct tcphdr);
	if (bpf_skb_load_bytes(skb, L4_OFF + sizeof(struct tcphdr), c.o, c.len))
		return 0;
	bpf_loop(40, option_step, &c, 0);
	return c.ts;
}

static __always_inline void parse_segment(struct __sk_buff *skb, const struct tcphdr *th, __u32 l4len,
					  struct segment *s)
{
	__u32 doff = th->doff * 4;
	__u64 ts = tcp_tsval(skb, doff);

	s->tsval = ts;
	s->has_ts = ts >> 32;
	s->seq = bpf_ntohl(th->seq);
	s->end = s->seq + (l4len > doff ? l4len - doff : 0) + th->syn + th->fin;
}

// tw_accepts reports whether a backend holding r's connection in
// TIME_WAIT takes the SYN s as a new connection (RFC 6191, RFC 1122
// 4.2.2.13): past the old connection's timestamps if both carry them,
// else past its sequence space.
static __always_inline int tw_accepts(const struct reverse *r, __u32 state, const struct segment *s)
{
	if (!(state & FLOW_FIN_SEQ))
		return 0;
	if (s->has_ts && (state & FLOW_FIN_TS)) {
		__s32 d = s->tsval - r->fin_tsval;

		if (d > 0)
			return 1;
		if (d < 0)
			return 0; // PAWS would drop it
	}
	return (__s32)(s->seq - r->fin_seq) > 0;
}

// reclaimable reports whether the port of r, whose state word was read
// as state, may go to a new flow whose opening SYN is syn (NULL for UDP).
// A backend that closed first keeps the connection in TIME_WAIT and would
// reject or misread a SYN from another client on the same tuple, so the
// port waits for that TIME_WAIT to end, unless the SYN is one the backend
// accepts in TIME_WAIT. Closes that leave no TIME_WAIT on the backend free
// the port at once (client closed first) or after a grace period (reset).
static __always_inline int reclaimable(const struct reverse *r, __u32 state, __u8 proto, __u64 now,
				       const struct segment *syn)
{
	__u64 age = now > r->seen ? now - r->seen : 0;

	if (state & FLOW_CLAIMED)
		return 0;
	if (proto == IPPROTO_UDP)
		return age > UDP_IDLE_NS;
	if ((state & FLOW_TIME_WAIT) == FLOW_TIME_WAIT)
		return age > TIME_WAIT_NS || (syn && tw_accepts(r, state, syn));
	if (state & FLOW_DONE)
		return 1;
	if ((state & FLOW_RST) || (state & FLOW_BOTH_FINS) == FLOW_BOTH_FINS)
		return age > CLOSED_GRACE_NS;
	return age > TCP_IDLE_NS;
}

// next_state returns a fresh state word of a generation after state's.
static __always_inline __u32 next_state(__u32 state)
{
	return (state | FLOW_FLAGS) + 1;
}

// reopen makes r, the entry of a flow on the client tuple of the SYN
// syn, the entry of that SYN's connection. The flow's own opening SYN
// again (a retransmission: no close or reset seen, the same ISN) finds
// its connection as it is; any other SYN opens a new connection on the
// tuple, which starts afresh under a new claim generation. Only the CPU
// whose compare-and-swap lands does so; 0 when another CPU changed the
// state first or the port is being claimed.
static __always_inline int reopen(struct reverse *r, __u32 state, __u64 now, const struct segment *syn)
{
	if (state & FLOW_CLAIMED)
		return 0;
	if (!(state & FLOW_FLAGS) && syn->seq == r->syn_seq)
		return 1;
	if (__sync_val_compare_and_swap(&r->state, state, next_state(state)) != state)
		return 0;
	r->seen = now;
	r->syn_seq = syn->seq;
	return 1;
}

// track_client follows a TCP flow from a segment the client sent. From
// its FIN on, it records where the client's sequence space ends and its
// newest timestamp: what a backend in TIME_WAIT compares a new SYN with.
static __always_inline void track_client(struct __sk_buff *skb, struct reverse *r, const struct tcphdr *th,
					 __u32 l4len)
{
	__u32 state = r->state, set = 0;
	struct segment s;

	if ((state & FLOW_BOTH_FINS) == FLOW_BOTH_FINS && th->ack)
		set |= FLOW_DONE;
	if (th->rst)
		set |= FLOW_RST;
	if (th->fin || (state & FLOW_FIN_CLIENT)) {
		parse_segment(skb, th, l4len, &s);
		if (th->fin) {
			r->fin_seq = s.end;
			set |= FLOW_FIN_CLIENT | FLOW_FIN_SEQ;
		}
		if (s.has_ts) {
			if (!(state & FLOW_FIN_TS) || (__s32)(s.tsval - r->fin_tsval) > 0)
				r->fin_tsval = s.tsval;
			set |= FLOW_FIN_TS;
		}
	}
	if (set & ~state)
		__sync_fetch_and_or(&r->state, set);
}

// track_backend follows a TCP flow from a segment the backend sent. The
// backend keeps TIME_WAIT when its FIN does not acknowledge the client's:
// it closed first, or both closed at once.
static __always_inline void track_backend(struct reverse *r, const struct tcphdr *th)
{
	__u32 state = r->state, set = 0;

	if ((state & FLOW_BOTH_FINS) == FLOW_BOTH_FINS && th->ack)
		set |= FLOW_DONE;
	if (th->rst)
		set |= FLOW_RST;
	if (th->fin) {
		set |= FLOW_FIN_BACKEND;
		if (!(state & FLOW_FIN_SEQ) || !th->ack || bpf_ntohl(th->ack_seq) != r->fin_seq)
			set |= FLOW_BACKEND_FIRST;
	}
	if (set & ~state)
		__sync_fetch_and_or(&r->state, set);
}

// owned reports whether r belongs to the client tuple k.
static __always_inline int owned(const struct reverse *r, const struct flow_key *k)
{
	return addr_eq(&r->client, &k->src) && r->cport == k->sport && addr_eq(&r->vip, &k->dst) &&
	       r->vport == k->dport;
}

// tcp_header returns the TCP header of a TCP packet whose headers
// the main program checked, NULL for other packets.
static __always_inline struct tcphdr *tcp_header(struct __sk_buff *skb, __u8 proto)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct tcphdr *th = data + L4_OFF;

	if (proto != IPPROTO_TCP || (void *)(th + 1) > data_end)
		return NULL;
	return th;
}

// reverse_nat handles a backend's reply to the node address.
__noinline int reverse_nat(struct __sk_buff *skb, struct flow_key *k)
{
	struct reverse *r;
	struct addr old[2], new[2];
	struct tcphdr *th;

	if (!skb || !k)
		return TCX_NEXT;
	th = tcp_header(skb, k->proto);
	r = bpf_map_lookup_elem(&reverse_flows, k);
	if (!r)
		return TCX_NEXT;
	if (th)
		track_backend(r, th);
	r->seen = bpf_ktime_get_ns();

	old[0] = k->src;
	old[1] = k->dst;
	new[0] = r->vip;
	new[1] = r->client;
	if (rewrite(skb, k->proto, old, new, ((__u32)k->dport << 16) | k->sport,
		    ((__u32)r->cport << 16) | r->vport)) {
		count(STAT_REWRITE_FAILED);
		return TCX_DROP;
	}
	count(STAT_REVERSE);
	return deliver(skb, r);
}

// claim gives the port of rk to the new flow rv. An absent entry is
// inserted only if still absent; a reclaimable one is taken by a
// compare-and-swap of its state, so that of several CPUs that found it
// reclaimable exactly one gets it, and then replaced as a whole.
static __always_inline int claim(struct flow_key *rk, struct reverse *cur, struct reverse *rv, __u64 now,
				 const struct segment *syn)
{
	__u32 state;

	if (!cur)
		return bpf_map_update_elem(&reverse_flows, rk, rv, BPF_NOEXIST);
	state = cur->state;
	if (!reclaimable(cur, state, rk->proto, now, syn))
		return -1;
	rv->state = next_state(state);
	if (__sync_val_compare_and_swap(&cur->state, state, rv->state | FLOW_CLAIMED) != state)
		return -1;
	if (bpf_map_update_elem(&reverse_flows, rk, rv, BPF_EXIST) == 0)
		return 0;
	// Evicted meanwhile: the port is free for whoever inserts first.
	return bpf_map_update_elem(&reverse_flows, rk, rv, BPF_NOEXIST);
}

static __always_inline void count_exhausted(const struct backend *b, __u8 proto)
{
	struct exhausted_key ek = {.backend = b->addr, .port = b->port, .proto = proto};
	__u64 one = 1, *n = bpf_map_lookup_elem(&exhausted, &ek);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&exhausted, &ek, &one, BPF_NOEXIST);
}

// try_port tries the NAT port rk->dport for the flow of client tuple k,
// whose reverse entry (seen set) is rv. A port whose entry already
// belongs to k (its forward entry was evicted) is taken back; otherwise,
// when repair_only, nothing is claimed. It returns STAT_NEW_FLOW or
// STAT_REPAIRED when the port is the flow's, -1 when not. A global
// function, so that the verifier checks it once, not once per probe.
__noinline int try_port(struct flow_key *k, struct flow_key *rk, struct reverse *rv, const struct segment *syn,
			int repair_only)
{
	struct reverse *cur;

	if (!k || !rk || !rv)
		return -1;
	cur = bpf_map_lookup_elem(&reverse_flows, rk);
	if (cur && owned(cur, k)) {
		if (syn && !reopen(cur, cur->state, rv->seen, syn))
			return -1;
		return STAT_REPAIRED;
	}
	if (repair_only || claim(rk, cur, rv, rv->seen, syn))
		return -1;
	return STAT_NEW_FLOW;
}

// pick copies into b the backend of the Service svc that a new flow of
// client tuple k gets now; -1 when the Service has none.
static __always_inline int pick(const struct flow_key *k, struct service *svc, struct backend *b)
{
	struct backend_key bk = {};
	struct backend *cur;
	__u32 n;

	bpf_spin_lock(&svc->lock);
	bk.service = svc->id;
	n = svc->count;
	bpf_spin_unlock(&svc->lock);
	if (n == 0)
		return -1;
	bk.slot = hash(k, 0) % n;
	cur = bpf_map_lookup_elem(&backends, &bk);
	if (!cur)
		return -1;
	bpf_spin_lock(&cur->lock);
	b->addr = cur->addr;
	b->port = cur->port;
	bpf_spin_unlock(&cur->lock);
	return 0;
}

// allocate finds the flow of client tuple k a NAT port towards b, the
// backend pick chose, probing at most NAT_PROBES ports (see try_port). It
// returns 0 with fw filled in and the forward entry written, or a stats
// slot explaining the drop.
static __always_inline int allocate(struct flow_key *k, const struct backend *b, const struct addr *node,
				    struct forward *fw, __u64 now, const struct segment *syn, int repair_only,
				    __u32 ifindex)
{
	struct reverse rv = {};
	struct flow_key rk = {};
	__u32 i;

	rk.src = b->addr;
	rk.dst = *node;
	rk.sport = b->port;
	rk.proto = k->proto;
	rv.client = k->src;
	rv.vip = k->dst;
	rv.cport = k->sport;
	rv.vport = k->dport;
	rv.seen = now;
	rv.ifindex = ifindex;
	if (syn)
		rv.syn_seq = syn->seq;
	fw->backend = b->addr;
	fw->bport = b->port;

	// Independent probes: linear probing would cluster around busy ports.
	for (i = 0; i < NAT_PROBES; i++) {
		int stat;

		rk.dport = bpf_htons(NAT_PORT_MIN + hash(k, 0x9e3779b9 + i) % NAT_PORT_COUNT);
		stat = try_port(k, &rk, &rv, syn, repair_only);
		if (stat < 0)
			continue;
		fw->nat_port = rk.dport;
		if (bpf_map_update_elem(&forward_flows, k, fw, BPF_ANY))
			return STAT_REWRITE_FAILED;
		count(stat);
		return 0;
	}
	if (repair_only)
		return STAT_NO_FLOW;
	count_exhausted(b, k->proto);
	return STAT_NAT_EXHAUSTED;
}

// forward_nat handles a packet addressed to a VIP.
__noinline int forward_nat(struct __sk_buff *skb, struct flow_key *k, __u32 l4len)
{
	struct service_key sk = {};
	__u32 zero = 0;
	struct forward *fw, nfw = {};
	struct reverse *r = NULL;
	struct flow_key rk = {};
	struct addr old[2], new[2];
	struct service *svc;
	struct backend b = {};
	struct config *cfg;
	struct segment syn = {}, *synp = NULL;
	__u64 now = bpf_ktime_get_ns();
	struct tcphdr *th;
	int err, picked = 0;

	if (!skb || !k)
		return TCX_DROP;
	th = tcp_header(skb, k->proto);
	sk.vip = k->dst;
	sk.port = k->dport;
	sk.proto = k->proto;
	cfg = bpf_map_lookup_elem(&config, &zero);
	svc = bpf_map_lookup_elem(&services, &sk);
	if (!cfg || !svc) {
		count(STAT_NO_SERVICE);
		return TCX_DROP;
	}
	if (th && th->syn && !th->ack) {
		parse_segment(skb, th, l4len, &syn);
		synp = &syn;
	}

	// An existing flow stays on its backend, ready or not, as long as its
	// NAT port still belongs to it: established connections drain on a
	// backend that left the Service. A SYN other than the flow's own
	// opening one is a new connection on the same tuple (a client reuses
	// source ports): it goes where a new flow would go now. When that is
	// the flow's backend it keeps the port, which the backend accepts
	// even in TIME_WAIT, since the client's sequence numbers and
	// timestamps only grow on one tuple; a backend that left the Service,
	// or that the tuple no longer hashes to, never sees it.
	fw = bpf_map_lookup_elem(&forward_flows, k);
	if (fw) {
		rk.src = fw->backend;
		rk.dst = cfg->node;
		rk.sport = fw->bport;
		rk.dport = fw->nat_port;
		rk.proto = k->proto;
		r = bpf_map_lookup_elem(&reverse_flows, &rk);
		if (r && !owned(r, k)) {
			r = NULL;
		} else if (!r && !synp) {
			// The reverse entry was evicted: take the port back if it
			// is still free.
			struct reverse rv = {.client = k->src, .vip = k->dst, .cport = k->sport,
					     .vport = k->dport, .seen = now,
					     .ifindex = skb->ingress_ifindex};

			if (bpf_map_update_elem(&reverse_flows, &rk, &rv, BPF_NOEXIST) == 0) {
				r = bpf_map_lookup_elem(&reverse_flows, &rk);
				count(STAT_REPAIRED);
			}
		}
		if (r && synp) {
			__u32 state = r->state;

			// Anything but the flow's own SYN again opens a new
			// connection, which needs a live lease.
			if ((state & FLOW_FLAGS) || syn.seq != r->syn_seq) {
				if (now > cfg->lease) {
					count(STAT_LEASE_EXPIRED);
					return TCX_DROP;
				}
				picked = pick(k, svc, &b) ? -1 : 1;
				if (picked < 0 || !addr_eq(&b.addr, &fw->backend) || b.port != fw->bport ||
				    !reopen(r, state, now, synp))
					r = NULL;
				else
					count(STAT_NEW_FLOW);
			}
		}
	}
	if (r) {
		if (th)
			track_client(skb, r, th, l4len);
		r->seen = now;
	} else {
		// Only a SYN starts a TCP flow: a stray segment (say, the last
		// ACK of a flow whose port was reused) must not take a port,
		// though it finds its own flow again if only the forward
		// entry was lost. A new flow needs a live lease.
		int repair_only = th && !synp;

		if (!repair_only && now > cfg->lease) {
			count(STAT_LEASE_EXPIRED);
			return TCX_DROP;
		}
		if (!picked)
			picked = pick(k, svc, &b) ? -1 : 1;
		if (picked < 0) {
			count(repair_only ? STAT_NO_FLOW : STAT_NO_BACKEND);
			return TCX_DROP;
		}
		err = allocate(k, &b, &cfg->node, &nfw, now, synp, repair_only, skb->ingress_ifindex);
		if (err) {
			count(err);
			return TCX_DROP;
		}
		fw = &nfw;
	}

	old[0] = k->src;
	old[1] = k->dst;
	new[0] = cfg->node;
	new[1] = fw->backend;
	if (rewrite(skb, k->proto, old, new, ((__u32)k->dport << 16) | k->sport,
		    ((__u32)fw->bport << 16) | fw->nat_port)) {
		count(STAT_REWRITE_FAILED);
		return TCX_DROP;
	}
	count(STAT_FORWARD);
	return TCX_PASS;
}

// csum_apply applies diff to a 16-bit Internet checksum (RFC 1624).
static __always_inline __u16 csum_apply(__u16 check, __u32 diff)
{
	__u64 s = (__u16)~check;

	s += diff;
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~(__u16)s;
}

// An ICMPv6 error's two headers and the rewrite that translates it.
struct icmp_nat {
	struct addr outer[2], outer_new[2];
	struct addr inner[2], inner_new[2];
	__u32 ports, ports_new; // the inner packet's source and destination ports
	__u8 proto; // the inner packet's
};

// icmp_rewrite translates an ICMPv6 error in place: outer addresses, the
// inner packet's addresses and ports, its L4 checksum when the error
// carries it, and the ICMPv6 checksum over all of that.
static __always_inline int icmp_rewrite(struct __sk_buff *skb, struct icmp_nat *n)
{
	__u32 word_off = INNER_L4_OFF + (n->proto == IPPROTO_TCP ? offsetof(struct tcphdr, check)
								: offsetof(struct udphdr, len));
	__u32 word, word_new;
	__s64 outer, inner;

	outer = bpf_csum_diff((__be32 *)n->outer, 32, (__be32 *)n->outer_new, 32, 0);
	inner = bpf_csum_diff((__be32 *)n->inner, 32, (__be32 *)n->inner_new, 32, 0);
	if (outer < 0 || inner < 0)
		return -1;
	inner = bpf_csum_diff(&n->ports, 4, &n->ports_new, 4, inner);
	if (inner < 0)
		return -1;

	// The embedded packet's own checksum covers its pseudo-header and
	// ports; the error may be cut short before it.
	if (skb->len >= word_off + 4 && bpf_skb_load_bytes(skb, word_off, &word, 4) == 0) {
		__u32 shift = n->proto == IPPROTO_TCP ? 0 : 16; // where the checksum is in the word
		__u16 check = word >> shift;
		__s64 d;

		if (check || n->proto == IPPROTO_TCP) {
			check = csum_apply(check, inner);
			if (!check && n->proto == IPPROTO_UDP)
				check = 0xffff;
		}
		word_new = (word & ~(0xffffU << shift)) | ((__u32)check << shift);
		d = bpf_csum_diff(&word, 4, &word_new, 4, inner);
		if (d < 0)
			return -1;
		inner = d;
		if (bpf_skb_store_bytes(skb, word_off, &word_new, 4, 0))
			return -1;
	}
	if (bpf_skb_store_bytes(skb, ADDRS_OFF, n->outer_new, 32, 0) ||
	    bpf_skb_store_bytes(skb, INNER_ADDRS_OFF, n->inner_new, 32, 0) ||
	    bpf_skb_store_bytes(skb, INNER_L4_OFF, &n->ports_new, 4, 0))
		return -1;
	if (l4_csum(skb, L4_OFF + offsetof(struct icmp6hdr, icmp6_cksum), outer, BPF_F_PSEUDO_HDR) ||
	    l4_csum(skb, L4_OFF + offsetof(struct icmp6hdr, icmp6_cksum), inner, 0))
		return -1;
	return 0;
}

// icmp_error handles an ICMPv6 packet. An error about a packet this
// program NATed goes where the packet came from: one about a packet to a
// backend (addressed to the node) to the client, one about a reply to a
// client (addressed to the VIP) to the backend. It returns TCX_NEXT for
// anything else that is not addressed to a VIP.
__noinline int icmp_error(struct __sk_buff *skb, struct flow_key *k, int is_vip)
{
	struct icmp6hdr ih;
	struct ipv6hdr in;
	struct icmp_nat n = {};
	struct reverse *r = NULL;
	__u32 zero = 0;
	struct config *cfg;

	if (!skb || !k)
		return TCX_NEXT;
	if (bpf_skb_load_bytes(skb, L4_OFF, &ih, sizeof(ih)))
		goto truncated;
	// Errors are types 1-127; 1-4 are the ones defined.
	if (ih.icmp6_type < ICMPV6_DEST_UNREACH || ih.icmp6_type > ICMPV6_PARAMPROB)
		goto other;
	if (bpf_skb_load_bytes(skb, INNER_OFF, &in, sizeof(in)) ||
	    bpf_skb_load_bytes(skb, INNER_L4_OFF, &n.ports, 4))
		goto truncated;
	if (in.nexthdr != IPPROTO_TCP && in.nexthdr != IPPROTO_UDP)
		goto other;
	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		goto other;

	n.proto = in.nexthdr;
	n.outer[0] = k->src;
	n.outer[1] = k->dst;
	__builtin_memcpy(&n.inner[0], &in.saddr, 16);
	__builtin_memcpy(&n.inner[1], &in.daddr, 16);
	n.outer_new[0] = k->src;

	if (!is_vip && addr_eq(&k->dst, &cfg->node) && addr_eq(&n.inner[0], &cfg->node)) {
		// About node:nat_port -> backend: the reverse entry knows the
		// client.
		struct flow_key rk = {.src = n.inner[1], .dst = cfg->node, .sport = n.ports >> 16,
				      .dport = n.ports & 0xffff, .proto = n.proto};
		r = bpf_map_lookup_elem(&reverse_flows, &rk);
		if (!r)
			return TCX_NEXT; // the node's own traffic
		if (addr_eq(&k->src, &rk.src))
			n.outer_new[0] = r->vip; // the backend itself answered
		n.outer_new[1] = r->client;
		n.inner_new[0] = r->client;
		n.inner_new[1] = r->vip;
		n.ports_new = ((__u32)r->vport << 16) | r->cport;
	} else if (is_vip && addr_eq(&n.inner[0], &k->dst)) {
		// About VIP -> client: the forward entry knows the backend.
		struct flow_key fk = {.src = n.inner[1], .dst = n.inner[0], .sport = n.ports >> 16,
				      .dport = n.ports & 0xffff, .proto = n.proto};
		struct forward *fw = bpf_map_lookup_elem(&forward_flows, &fk);

		if (!fw) {
			count(STAT_ICMP_NO_FLOW);
			return TCX_DROP;
		}
		if (addr_eq(&k->src, &fk.src))
			n.outer_new[0] = cfg->node; // the client itself answered
		n.outer_new[1] = fw->backend;
		n.inner_new[0] = fw->backend;
		n.inner_new[1] = cfg->node;
		n.ports_new = ((__u32)fw->nat_port << 16) | fw->bport;
	} else {
		goto other;
	}
	if (icmp_rewrite(skb, &n)) {
		count(STAT_REWRITE_FAILED);
		return TCX_DROP;
	}
	count(STAT_ICMP_TRANSLATED);
	return r ? deliver(skb, r) : TCX_PASS;

other:
	if (!is_vip)
		return TCX_NEXT;
	count(STAT_PROTOCOL);
	return TCX_DROP;
truncated:
	if (!is_vip)
		return TCX_NEXT;
	count(STAT_TRUNCATED);
	return TCX_DROP;
}

// unsupported_reason names why an IPv6 packet whose next header is nexthdr
// is not Service traffic the program handles.
static __always_inline __u32 unsupported_reason(__u8 nexthdr)
{
	switch (nexthdr) {
	case IPPROTO_FRAGMENT:
		return STAT_FRAGMENT;
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_DSTOPTS:
	case IPPROTO_AH:
	case IPPROTO_ESP:
	case 135: // mobility
	case 139: // host identity
	case 140: // shim6
		return STAT_EXTENSION_HEADER;
	}
	return STAT_PROTOCOL;
}

SEC("tcx/ingress")
int podmin_vip(struct __sk_buff *skb)
{
	void *data, *data_end;
	struct ipv6hdr *ip6;
	struct tcphdr *th = NULL;
	struct flow_key k = {};
	__u32 is_vip, l4len, reason = STAT_TRUNCATED;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TCX_NEXT;
	// The headers the program reads directly are usually linear already;
	// pull them only when they are not (TCP options and ICMPv6 errors are
	// read with bpf_skb_load_bytes).
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
	l4len = bpf_ntohs(ip6->payload_len);

	// Only an immediate TCP, UDP or ICMPv6 header is parsed: fragments
	// and extension-header chains to a VIP are refused, anything else is
	// not Service traffic.
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
	} else if (k.proto == IPPROTO_ICMPV6) {
		return icmp_error(skb, &k, is_vip);
	} else {
		reason = unsupported_reason(k.proto);
		goto unsupported;
	}

	if (is_vip)
		return forward_nat(skb, &k, l4len);
	return reverse_nat(skb, &k);

unsupported:
	if (!is_vip)
		return TCX_NEXT;
	count(reason);
	return TCX_DROP;
}

char __license[] SEC("license") = "Apache-2.0";
