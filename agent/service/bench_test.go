// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
)

// Load of the DNS benchmarks: benchServices Services in benchNamespaces
// namespaces, asked for by benchClients concurrent UDP clients, each
// waiting for its answer before it sends the next query.
const (
	benchServices   = 1000
	benchNamespaces = 10
	benchClients    = 8
)

func benchRecords() []service.Service {
	var out []service.Service
	for i := range benchServices {
		out = append(out, service.Identity(cluster, fmt.Sprintf("ns-%d", i%benchNamespaces), fmt.Sprintf("svc-%d", i)))
	}
	return out
}

// zoneFile renders records as a zone for CoreDNS's file plugin: the same
// SOA, TTL and AAAA records the agent serves.
func zoneFile(records []service.Service) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL %d\n", service.Zone, service.TTL)
	fmt.Fprintf(&b, "@ IN SOA ns.dns.%s. hostmaster.%s. 1 7200 1800 86400 %d\n", service.ClusterDomain, service.ClusterDomain, service.TTL)
	fmt.Fprintf(&b, "@ IN NS ns.dns.%s.\n", service.ClusterDomain)
	for _, s := range records {
		fmt.Fprintf(&b, "%s.%s IN AAAA %s\n", s.Name, s.Namespace, s.VIP)
	}
	return []byte(b.String())
}

// envServe makes the test binary run the agent's server on the benchmark
// records instead of tests, so the benchmark measures it, like CoreDNS, as
// a process of its own beside the load generator.
const envServe = "PODMIN_DNS_BENCH_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		if err := serveBenchRecords(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// serveBenchRecords serves the benchmark records on a free loopback port,
// prints the address, and stops when standard input closes.
func serveBenchRecords() error {
	s := service.New(service.Config{Addr: "127.0.0.1:0"})
	if err := s.Update(benchRecords()); err != nil {
		return err
	}
	if err := s.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println(s.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Stop(ctx)
}

// startServerProcess runs serveBenchRecords in a child test binary until
// the benchmark ends.
func startServerProcess(b *testing.B) netip.AddrPort {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServe+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the server process printed no address: %v", err)
	}
	addr, err := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil {
		b.Fatalf("the server process printed %q: %v", line, err)
	}
	return addr
}

// benchTargets starts the agent's server and, when the binary is
// available, CoreDNS serving the same records from a zone file, each as a
// process of its own. It checks that both give the same answers before
// any timing.
func benchTargets(b *testing.B) (podmin, coredns netip.AddrPort) {
	records := benchRecords()
	bin := coreDNSBinary(b)
	podmin = startServerProcess(b)
	dir := b.TempDir()
	zone := filepath.Join(dir, "db.svc.cluster.local")
	if err := os.WriteFile(zone, zoneFile(records), 0o644); err != nil {
		b.Fatal(err)
	}
	coredns = startCoreDNS(b, bin, "127.0.0.1", func(port uint16) []byte {
		return fmt.Appendf(nil, "%s:%d {\n    bind 127.0.0.1\n    file %s\n}\n", strings.TrimSuffix(service.Zone, "."), port, zone)
	}, records[0].FQDN())
	for i, rec := range records {
		if i%97 != 0 {
			continue
		}
		for _, target := range []netip.AddrPort{podmin, coredns} {
			r := query(b, "udp", target, rec.FQDN(), dns.TypeAAAA, false)
			if got := vipOf(b, r); got != rec.VIP || r.Answer[0].Header().Ttl != service.TTL {
				b.Fatalf("%v answers %s with %v TTL %d, want %v TTL %d", target, rec.FQDN(), got, r.Answer[0].Header().Ttl, rec.VIP, service.TTL)
			}
		}
	}
	return podmin, coredns
}

// loadGenerator is the one client both servers are measured with:
// benchClients connected UDP sockets, each sending a query for the next
// Service name and reading its reply before the next, checking the ID and
// that the reply holds an answer.
type loadGenerator struct {
	queries [][]byte
}

func newLoadGenerator(b *testing.B) *loadGenerator {
	g := &loadGenerator{}
	for _, rec := range benchRecords() {
		m := new(dns.Msg)
		m.SetQuestion(rec.FQDN(), dns.TypeAAAA)
		g.queries = append(g.queries, packed(b, m))
	}
	return g
}

// run sends n queries to target and returns how long they took and how
// many had to be resent after a lost datagram.
func (g *loadGenerator) run(target netip.AddrPort, n int) (time.Duration, int, error) {
	conns := make([]net.Conn, benchClients)
	for i := range conns {
		c, err := net.Dial("udp", target.String())
		if err != nil {
			return 0, 0, err
		}
		defer c.Close()
		conns[i] = c
	}
	var wg sync.WaitGroup
	errs := make([]error, benchClients)
	resent := make([]int, benchClients)
	start := time.Now()
	for i, c := range conns {
		share := n / benchClients
		if i < n%benchClients {
			share++
		}
		wg.Go(func() {
			q := make([]byte, 0, 512)
			reply := make([]byte, 1232)
			for j := range share {
				id := uint16(i<<12 | j&0xfff)
				q = append(q[:0], g.queries[(i*share+j)%len(g.queries)]...)
				binary.BigEndian.PutUint16(q, id)
				for {
					if _, err := c.Write(q); err != nil {
						errs[i] = err
						return
					}
					_ = c.SetReadDeadline(time.Now().Add(time.Second))
					k, err := c.Read(reply)
					if errors.Is(err, os.ErrDeadlineExceeded) {
						resent[i]++
						if resent[i] > 100 {
							errs[i] = errors.New("more than 100 queries lost")
							return
						}
						continue
					}
					if err != nil {
						errs[i] = err
						return
					}
					// ID, QR and RCODE NOERROR, one answer.
					if k < 12 || binary.BigEndian.Uint16(reply) != id || reply[2]&0x80 == 0 || reply[3]&0xf != 0 || binary.BigEndian.Uint16(reply[6:]) != 1 {
						errs[i] = fmt.Errorf("bad reply to query %d: % x", id, reply[:min(k, 16)])
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, r := range resent {
		total += r
	}
	return time.Since(start), total, errors.Join(errs...)
}

// BenchmarkDNSAnswers measures answers per second on loopback for the
// agent's server and for CoreDNS serving the same records with its file
// plugin, with the same load generator, in one run:
//
//	go test ./agent/service -run '^$' -bench DNSAnswers -count 3
//
// On a shared machine the two sub-benchmarks drift with its load; read
// the ratio from BenchmarkDNSAnswersInterleaved.
func BenchmarkDNSAnswers(b *testing.B) {
	podmin, coredns := benchTargets(b)
	g := newLoadGenerator(b)
	for _, target := range []struct {
		name string
		addr netip.AddrPort
	}{{"podmin", podmin}, {"coredns", coredns}} {
		b.Run(target.name, func(b *testing.B) {
			b.ResetTimer()
			elapsed, resent, err := g.run(target.addr, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "answers/s")
			b.ReportMetric(float64(resent), "resent")
		})
	}
}

// BenchmarkDNSAnswersInterleaved alternates rounds of benchRound queries
// between the two servers, swapping which goes first, so both see the
// same machine load; it reports each rate and podmin/coredns, the ratio.
func BenchmarkDNSAnswersInterleaved(b *testing.B) {
	const benchRound = 4000
	podmin, coredns := benchTargets(b)
	g := newLoadGenerator(b)
	var spent [2]time.Duration
	targets := [2]netip.AddrPort{podmin, coredns}
	round := 0
	for b.Loop() {
		for k := range 2 {
			i := (round + k) % 2
			elapsed, _, err := g.run(targets[i], benchRound)
			if err != nil {
				b.Fatal(err)
			}
			spent[i] += elapsed
		}
		round++
	}
	podminRate := float64(round*benchRound) / spent[0].Seconds()
	corednsRate := float64(round*benchRound) / spent[1].Seconds()
	b.ReportMetric(podminRate, "podmin-answers/s")
	b.ReportMetric(corednsRate, "coredns-answers/s")
	b.ReportMetric(podminRate/corednsRate, "podmin/coredns")
}
