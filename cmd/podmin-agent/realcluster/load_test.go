// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore"
)

// The client's pace: new connections per second, across the entry
// nodes, half to the VIP and half by name; each entry node's keep-alive
// stream sends a request every keepEvery. A request fails after
// requestTimeout, a client's patience.
const (
	newPerSecond   = 20
	keepEvery      = 100 * time.Millisecond
	requestTimeout = 3 * time.Second
)

// tlsTrust is the workload CA bundle a client of the Services trusts,
// read from identity/ca.json.
type tlsTrust struct{ roots *x509.CertPool }

func (c *cluster) loadTrust() error {
	obj, err := c.store.Get(context.Background(), "identity/ca.json", objstore.GetOptions{})
	if err != nil {
		return fmt.Errorf("the workload CA: %w", err)
	}
	var doc struct{ Active, Pending, Retired string }
	if err := json.Unmarshal(obj.Data, &doc); err != nil {
		return fmt.Errorf("identity/ca.json: %w", err)
	}
	roots := x509.NewCertPool()
	for _, b := range []string{doc.Active, doc.Pending, doc.Retired} {
		roots.AppendCertsFromPEM([]byte(b))
	}
	c.tls = &tlsTrust{roots: roots}
	return nil
}

// load is the client: from its namespace it opens new HTTPS connections
// at a fixed rate to a Service, through each entry node in turn, half to
// the VIP and half to the name the node's DNS gives, and keeps one
// long-lived connection per entry node busy with a request every
// keepEvery, as a Go client with keep-alive does (it retries an
// idempotent request on a connection the server closed while idle).
type load struct {
	c       *cluster
	name    string // the Service's DNS name
	vip     netip.Addr
	entries func() []*node

	mu    sync.Mutex
	shots []shot
	quit  chan struct{}
	wg    sync.WaitGroup
	dials atomic.Int64 // keep-alive connections opened
}

// startLoad starts the client on namespace/svc through the nodes entries
// returns (asked again for every request).
func (c *cluster) startLoad(namespace, svc string, entries func() []*node) *load {
	l := &load{c: c, name: svc + "." + namespace + ".svc.cluster.local", vip: service.Identity(clusterID, namespace, svc).VIP,
		entries: entries, quit: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / newPerSecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.quit:
				return
			case <-tick.C:
			}
			nodes := l.entries()
			if len(nodes) == 0 {
				continue
			}
			n := nodes[i%len(nodes)]
			kind := kindVIP
			if (i/len(nodes))%2 == 1 {
				kind = kindName
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.record(l.newConnection(kind, n, 0))
			}()
		}
	}()
	for _, n := range entries() {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.keepAlive(n)
		}()
	}
	return l
}

func (l *load) record(s shot) {
	l.mu.Lock()
	l.shots = append(l.shots, s)
	l.mu.Unlock()
}

// snapshot returns the requests so far.
func (l *load) snapshot() []shot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]shot(nil), l.shots...)
}

// stop ends the client once its requests in flight have ended.
func (l *load) stop() []shot {
	close(l.quit)
	l.wg.Wait()
	return l.snapshot()
}

// transport dials the Service from the client's namespace, entering
// through node n (the client's address for n routes the VIPs there),
// from source port lport (0: any), and reports each connection's source
// port to conn.
func (l *load) transport(n *node, lport int, keepAlive bool, conn func(port int)) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := l.c.client.dial(ctx, network, addr, clientAddr(n.i), lport)
			if err == nil && conn != nil {
				conn(c.LocalAddr().(*net.TCPAddr).Port)
			}
			return c, err
		},
		TLSClientConfig:     &tls.Config{RootCAs: l.c.tls.roots, ServerName: l.name, MinVersion: tls.VersionTLS13},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     time.Minute,
	}
}

// resolve asks node n's DNS, as a Pod on n would, for the Service's name.
func (l *load) resolve(n *node) (netip.Addr, error) {
	var addrs []netip.Addr
	var rcode int
	err := l.c.client.do(func() error {
		var err error
		addrs, rcode, err = e2enode.Lookup(net.JoinHostPort(n.cfg.Addr.String(), "53"), l.name)
		return err
	})
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("DNS at %s: %w", n.id, err)
	case rcode != dns.RcodeSuccess || len(addrs) != 1:
		return netip.Addr{}, fmt.Errorf("DNS at %s: rcode %d, %v", n.id, rcode, addrs)
	}
	return addrs[0], nil
}

// newConnection makes one request on a new connection through node n
// (from source port lport when not 0).
func (l *load) newConnection(kind string, n *node, lport int) shot {
	s := shot{at: time.Now(), kind: kind, entry: n.id, sport: lport}
	target := l.vip
	if kind == kindName {
		var err error
		if target, err = l.resolve(n); err != nil {
			s.err, s.took = err, time.Since(s.at)
			return s
		}
	}
	var port atomic.Int64
	tr := l.transport(n, lport, false, func(p int) { port.Store(int64(p)) })
	defer tr.CloseIdleConnections()
	s.version, s.pod, s.err = get(context.Background(), &http.Client{Transport: tr, Timeout: requestTimeout}, target)
	s.took = time.Since(s.at)
	if p := int(port.Load()); p != 0 {
		s.sport = p
	}
	var de *dialError
	if errors.As(s.err, &de) {
		s.sport = de.port
	}
	if s.err != nil && s.sport != 0 {
		// Where the entry node's dataplane sent this connection.
		s.backend = flowBackend(n, clientAddr(n.i), target, s.sport)
	}
	return s
}

// keepAlive sends requests on one long-lived connection through n until
// the load stops or n leaves the entry nodes.
func (l *load) keepAlive(n *node) {
	var port atomic.Int64
	tr := l.transport(n, 0, true, func(p int) { l.dials.Add(1); port.Store(int64(p)) })
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: requestTimeout}
	tick := time.NewTicker(keepEvery)
	defer tick.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-tick.C:
		}
		if !slices.Contains(l.entries(), n) {
			return
		}
		s := shot{at: time.Now(), kind: kindKeep, entry: n.id}
		var used atomic.Int64
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if a, ok := info.Conn.LocalAddr().(*net.TCPAddr); ok {
				used.Store(int64(a.Port))
			}
		}})
		s.version, s.pod, s.err = get(ctx, client, l.vip)
		s.took, s.sport = time.Since(s.at), int(used.Load())
		var de *dialError
		if errors.As(s.err, &de) {
			s.sport = de.port
		}
		if s.err != nil && s.sport != 0 {
			s.backend = flowBackend(n, clientAddr(n.i), l.vip, s.sport)
		}
		l.record(s)
	}
}

// get asks the workload at the VIP or address target, port 443, for its
// version and Pod.
func get(ctx context.Context, client *http.Client, target netip.Addr) (version, pod string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(target.String(), "443")+"/", nil)
	if err != nil {
		return "", "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	var h e2enode.Hello
	if err := json.Unmarshal(b, &h); err != nil {
		return "", "", err
	}
	if h.Pod == "" {
		return "", "", errors.New("an answer without the Pod's name")
	}
	return h.Version, h.Pod, nil
}
