// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

// run is the state the proofs share.
type run struct {
	*node
	secret   string
	deployAt time.Time
	watch    *watch
	web      netip.Addr  // the web Pod's address
	probe    netip.Addr  // a second Pod, the Service's client
	extra    [][2]string // NodeGroup and name of the other deployments the proofs made
}

// runProofs deploys the workload through the podmin CLI and runs the
// proofs in order; each reports PASS, FAIL or NOT RUN. The last deletes
// every deployment and stops the node.
func (n *node) runProofs() {
	t := n.t
	n.pushImages()
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	r := &run{node: n, secret: "e2e-secret-" + hex.EncodeToString(buf)}
	if _, err := n.podminErr([]byte(r.secret), "secret", "create", "token", "--for", "web", "--stdin"); err != nil {
		t.Fatalf("podmin secret create: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.watch = n.observe(ctx, "web")
	r.deployAt = time.Now()
	n.podmin("deploy", "web", "-g", nodegroup, "--image", "hello:v1", "--service", "--secret", "token")
	n.podmin("deploy", "probe", "-g", nodegroup, "--image", "hello:v1")

	proofs := []struct {
		title string
		fn    func(*e2enode.Proof)
	}{
		{"the Pod runs under runsc and answers HTTP on its Pod IP", r.runsc},
		{"the agent sees it ready through kubelet's Pods API", r.readiness},
		{"its workload identity is mounted and verifies against the cluster CA", r.identity},
		{"its Service resolves through the agent's DNS and answers on the VIP through the eBPF dataplane", r.service},
		{"a lost deployments index keeps every Pod; podmin deploy refuses, podmin index rebuild restores it", r.lostIndex},
		{"podmin deploy --image hello:v2 rolls it", r.rollout},
		{"its secret is readable inside the container and nowhere else", r.secretMount},
		{"podmin deploy --wait returns once the new Pod answers HTTP, not before", r.deployWait},
		{"a rollback to the revision a node ran before counts no restarts", r.rollbackRestarts},
		{"commit → podmin status shows ready (benchmark)", r.benchmark},
		{"a broken image (its command exits) fails podmin deploy --wait with the node's error within the timeout", r.brokenWait},
		{"a broken image without a readiness probe (no Service) fails podmin deploy --wait too: kubelet's brief ready does not pass", r.brokenWaitProbeless},
		{"recipes/rollout.star stops at the failing canary NodeGroup and leaves the next untouched", r.rolloutRecipe},
		{"a rollout to an image that cannot be pulled keeps the running revision serving and fails podmin deploy --wait with the pull's error", r.unpullable},
		{"a failing readiness probe is named, with its address, port and answer, in podmin deploy --wait's error", r.probeNamed},
		{"podmin delete, then podmin deploy of the same name: the workload starts again with its identity and values", r.deleteRedeploy},
		{"a node error is said once in podmin status, and podmin status --wait right after a fix waits for the node", r.waitAfterFix},
		{"a recipe's traceback names its file by its absolute path", r.traceback},
		{"an agent SIGKILLed and restarted: no call to the Service by name through the VIP fails", r.agentRestart},
		{"kubelet SIGKILLed: /readyz and podmin status say kubelet is down, and recover when it is back", r.kubeletDown},
		{"a full disk is named in /readyz and in podmin deploy --wait's error, and forgotten once space is freed", r.diskFull},
		{"podmin delete stops every Pod and the node ends clean", r.deleted},
	}
	// scripts/e2e.sh expects this many proof lines.
	n.rep.Line(fmt.Sprintf("e2e proofs: %d", len(proofs)))
	only := selected(os.Getenv(envOnly))
	for i, pr := range proofs {
		if only != nil && !only[i+1] && i+1 > setupProofs && i+1 < len(proofs) {
			n.rep.Prove(t, strconv.Itoa(i+1), pr.title, func(p *e2enode.Proof) { p.NotRun(envOnly + " leaves it out") })
			continue
		}
		n.rep.Prove(t, strconv.Itoa(i+1), pr.title, pr.fn)
	}
}

// setupProofs are the first proofs, which the others build on: they run
// whatever envOnly selects, as does the last, which cleans up.
const setupProofs = 4

// selected parses envOnly's comma-separated proof numbers; nil selects
// every proof.
func selected(v string) map[int]bool {
	if v == "" {
		return nil
	}
	out := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out[n] = true
		}
	}
	return out
}

// runsc: the Pod answers on its Pod IP from a gVisor sandbox.
func (r *run) runsc(p *e2enode.Proof) {
	var h hello
	r.waitFor(p, 3*time.Minute, "web to answer on its Pod IP", func() bool {
		_, ip, ok := readyPod("web")
		if !ok {
			return false
		}
		var err error
		h, err = helloAt(ip)
		r.web = ip
		return err == nil
	})
	p.Figure("podmin deploy → HTTP answer on the Pod IP %s: %s", r.web, time.Since(r.deployAt).Round(10*time.Millisecond))
	if h.Version != "v1" || h.Pod != staticName("web") {
		p.Fatalf("answer %+v, want version v1 from Pod %s", h, staticName("web"))
	}
	if h.Kernel == "" || h.Kernel == hostKernel() {
		p.Fatalf("the container reports the machine's kernel %q: it does not run in a gVisor sandbox", h.Kernel)
	}
	p.Figure("kernel seen inside the container: %q (the machine's: %q)", h.Kernel, strings.Fields(hostKernel())[2])
	out, err := r.ctr("containers", "ls", `labels."io.kubernetes.pod.name"==`+staticName("web"))
	if err != nil {
		p.Fatalf("ctr containers ls: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")[1:]
	if len(lines) < 2 {
		p.Fatalf("containerd lists %d containers of Pod web, want its sandbox and container:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if f := strings.Fields(l); f[len(f)-1] != "io.containerd.runsc.v1" {
			p.Fatalf("container %s runs with %s, not io.containerd.runsc.v1", f[0], f[len(f)-1])
		}
	}
	p.Figure("containerd runs the Pod's %d containers (sandbox included) with io.containerd.runsc.v1", len(lines))
}

// readiness: kubelet reports the Pod ready through its Pods API, and the
// agent, which learns Pod addresses only from that API, publishes it as
// the Service's endpoint.
func (r *run) readiness(p *e2enode.Proof) {
	var pod *corev1.Pod
	r.waitFor(p, time.Minute, "web ready in the Pods API", func() bool {
		var ok bool
		pod, r.web, ok = readyPod("web")
		return ok
	})
	r.waitFor(p, time.Minute, "the web Pod as the Service's endpoint in the agent's snapshot", func() bool {
		eps := r.endpoints("default", "web")
		return len(eps) == 1 && eps[0] == r.web.String()
	})
	if !strings.Contains(r.agent().LogText(), "kubelet Pods API watch synced") {
		p.Fatal("the agent never synced a watch of kubelet's Pods API")
	}
	var readyCond corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			readyCond = c
		}
	}
	ready, endpoint := r.watch.times(r.web.String())
	p.Figure("kubelet: PodReady=%s since %s (podmin deploy → ready seen %s)", readyCond.Status,
		readyCond.LastTransitionTime.Format(time.TimeOnly), ready.Sub(r.deployAt).Round(10*time.Millisecond))
	p.Figure("ready seen in the Pods API → endpoint %s in the agent's Service snapshot: %s", r.web, endpoint.Sub(ready).Round(10*time.Millisecond))
}

// identity: the Pod reads tls.crt, tls.key and ca.crt from its mount; the
// leaf verifies against the workload CA in the bucket and is what the Pod
// serves on 8443.
func (r *run) identity(p *e2enode.Proof) {
	read := func(name string) []byte {
		b, err := get(podURL(r.web, "/read?path=/var/run/secrets/podmin.dev/tls/"+name))
		if err != nil {
			p.Fatalf("read %s inside the container: %v", name, err)
		}
		return b
	}
	crt, key, caPEM := read("tls.crt"), read("tls.key"), read("ca.crt")
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		p.Fatalf("tls.crt and tls.key are no pair: %v", err)
	}
	leaf := pair.Leaf
	obj, err := local.Open(r.bucket).Get(context.Background(), "identity/ca.json", objstore.GetOptions{})
	if err != nil {
		p.Fatalf("the cluster's workload CA: %v", err)
	}
	var doc struct{ Active, Pending, Retired string }
	if err := json.Unmarshal(obj.Data, &doc); err != nil {
		p.Fatalf("identity/ca.json: %v", err)
	}
	roots := x509.NewCertPool()
	var bundle []*x509.Certificate
	for _, block := range []string{doc.Active, doc.Pending, doc.Retired} {
		if block == "" {
			continue
		}
		certs := parseCerts(p, []byte(block))
		bundle = append(bundle, certs...)
		for _, c := range certs {
			roots.AddCert(c)
		}
	}
	mounted := parseCerts(p, caPEM)
	if len(bundle) == 0 || len(mounted) != len(bundle) || !slices.EqualFunc(mounted, bundle, (*x509.Certificate).Equal) {
		p.Fatalf("ca.crt in the container (%d certificates) is not the cluster's CA bundle (%d)", len(mounted), len(bundle))
	}
	spiffe := fmt.Sprintf("spiffe://%s.podmin.internal/ns/default/pod/web", cluster)
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != spiffe {
		p.Fatalf("URI SANs %v, want %s", leaf.URIs, spiffe)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "web.default.svc.cluster.local",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		p.Fatalf("the leaf does not verify against the cluster CA: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		p.Fatalf("the leaf is no client certificate of the cluster CA: %v", err)
	}
	p.Figure("leaf %s, DNS SANs %v, valid %s, verifies against identity/ca.json (%d CA certificate(s), the same as ca.crt)",
		spiffe, leaf.DNSNames, leaf.NotAfter.Sub(leaf.NotBefore).Round(time.Minute), len(bundle))
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(r.web.String(), "8443"),
		&tls.Config{RootCAs: roots, ServerName: "web.default.svc.cluster.local", MinVersion: tls.VersionTLS13})
	if err != nil {
		p.Fatalf("TLS to the Pod's 8443 with the cluster CA: %v", err)
	}
	defer conn.Close()
	if served := conn.ConnectionState().PeerCertificates[0]; !served.Equal(leaf) {
		p.Fatalf("the Pod serves %s, not its mounted leaf", served.Subject)
	}
	p.Figure("the Pod serves that leaf on [%s]:8443 (TLS 1.3, verified as web.default.svc.cluster.local)", r.web)
}

// parseCerts decodes every certificate of a PEM bundle.
func parseCerts(p *e2enode.Proof, data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			p.Fatalf("a certificate of the bundle: %v", err)
		}
		out = append(out, c)
	}
}

// ctr runs containerd's ctr in the k8s.io namespace and returns its
// standard output.
func (n *node) ctr(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(n.tools, "ctr"), append([]string{"--address", containerdSock, "-n", "k8s.io"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
