// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
	"podmin.dev/podmin/internal/syncio"
)

// node is one test machine: podmin's state directories, a local bucket
// and the root a local-mode agent reconciles into.
type node struct {
	t       *testing.T
	dir     string
	podmin  string
	env     []string
	root    string
	bucket  string
	agent   *exec.Cmd
	health  string
	logs    *syncio.Buffer
	exited  chan error
	healthy chan string
}

func newNode(t *testing.T) *node {
	if testing.Short() {
		t.Skip("builds the podmin binary")
	}
	dir := t.TempDir()
	podmin := filepath.Join(dir, "podmin")
	build := exec.Command("go", "build", "-o", podmin, "podmin.dev/podmin/cmd/podmin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build podmin: %v\n%s", err, out)
	}
	n := &node{t: t, dir: dir, podmin: podmin, root: filepath.Join(dir, "root"), bucket: filepath.Join(dir, "bucket")}
	n.env = append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	return n
}

func (n *node) podminOK(args ...string) string {
	n.t.Helper()
	cmd := exec.Command(n.podmin, args...)
	cmd.Env = n.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("podmin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var healthAddrRE = regexp.MustCompile(`msg="serving health endpoints".* addr=(\S+)`)

// startAgent runs this test binary as podmin-agent in local mode.
func (n *node) startAgent(nodegroup string) {
	n.t.Helper()
	cmd := exec.Command(os.Args[0], "--provider", "local", "--bucket", n.bucket, "--region", "local",
		"--cluster", "demo", "--nodegroup", nodegroup, "--ipv6-prefix", "2001:db8:0:1:2::/80")
	cmd.Env = append(n.env, "PODMIN_AGENT_TEST_RUN_MAIN=1", "PODMIN_ROOT="+n.root,
		"PODMIN_AGENT_HEALTH_ADDR=127.0.0.1:0", "PODMIN_AGENT_REGISTRY_ADDR=127.0.0.1:0", "PODMIN_AGENT_POLL_INTERVAL=20ms", "PODMIN_AGENT_DNS_TTL_MARGIN=50ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.agent, n.logs = cmd, &syncio.Buffer{}
	n.exited, n.healthy = make(chan error, 1), make(chan string, 1)
	go followAgent(cmd, stderr, n.logs, healthAddrRE, n.healthy, n.exited)
	n.t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case n.health = <-n.healthy:
	case err := <-n.exited:
		n.t.Fatalf("agent exited: %v\n%s", err, n.log())
	case <-time.After(30 * time.Second):
		n.t.Fatalf("agent did not serve health endpoints:\n%s", n.log())
	}
}

func (n *node) log() string { return n.logs.String() }

// followAgent copies the agent's standard error, line by line, into logs
// and sends the first submatch of every line matching re on found; once
// the agent closes it, it sends the agent's exit on exited.
func followAgent(cmd *exec.Cmd, stderr io.Reader, logs *syncio.Buffer, re *regexp.Regexp, found chan<- string, exited chan<- error) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_, _ = logs.Write([]byte(sc.Text() + "\n"))
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			found <- m[1]
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	exited <- cmd.Wait()
}

// stopAgent sends SIGTERM and expects a clean exit.
func (n *node) stopAgent() {
	n.t.Helper()
	if err := n.agent.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatal(err)
	}
	select {
	case err := <-n.exited:
		if err != nil {
			n.t.Fatalf("agent exit after SIGTERM: %v\n%s", err, n.log())
		}
	case <-time.After(30 * time.Second):
		n.t.Fatalf("agent did not exit after SIGTERM:\n%s", n.log())
	}
	if l := n.log(); !strings.Contains(l, "waiting the DNS TTL margin") || !strings.Contains(l, `msg=stopped`) {
		n.t.Fatalf("shutdown log:\n%s", l)
	}
}

func (n *node) readyz() (int, string) {
	resp, err := http.Get("http://" + n.health + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond until it holds or a deadline passes.
func (n *node) eventually(what string, cond func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			n.t.Fatalf("timed out waiting for %s\nagent log:\n%s", what, n.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (n *node) manifests() string { return filepath.Join(n.root, "etc", "podmin", "manifests") }

func (n *node) staticPods() []string {
	entries, _ := os.ReadDir(n.manifests())
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

func (n *node) pod(name string) *corev1.Pod {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.manifests(), name+".yaml"))
	if err != nil {
		n.t.Fatal(err)
	}
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		n.t.Fatalf("%s.yaml is not a complete Pod: %v", name, err)
	}
	return &p
}

func TestLocalNodeEndToEnd(t *testing.T) {
	n := newNode(t)
	n.podminOK("connect", "demo", "--provider", "local", "--bucket", n.bucket)
	name, err := secrets.PodSecret("demo", "default", "web", "token")
	if err != nil {
		t.Fatal(err)
	}
	if err := secretslocal.New(filepath.Join(n.dir, "data", "podmin", "secrets")).Create(context.Background(), name, secrets.Value("s3cret")); err != nil {
		t.Fatal(err)
	}
	init := filepath.Join(n.dir, "web.yaml")
	n.podminOK("init", "web", "-g", "workers", "--image", "hello:v1", "--service", "--secret", "token", "-f", init)
	manifest, _ := os.ReadFile(init)
	if err := os.WriteFile(init, []byte(strings.ReplaceAll(string(manifest), "podmin.dev/aws-parameter-store", "podmin.dev/local")), 0o644); err != nil {
		t.Fatal(err)
	}
	n.podminOK("deploy", "web", "-g", "workers", "-f", init)
	n.podminOK("deploy", "api", "-g", "workers", "--image", "api:v1")
	n.podminOK("deploy", "proxy", "-g", "edge", "--image", "proxy:v1", "--service")
	foreign := filepath.Join(n.root, "etc", "kubernetes", "manifests", "kube-thing.yaml")
	if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, []byte("foreign"), 0o644); err != nil {
		t.Fatal(err)
	}

	n.startAgent("workers")
	n.eventually("the workers Pods", func() bool { return slices.Equal(n.staticPods(), []string{"api.yaml", "web.yaml"}) })
	n.eventually("readiness", func() bool { code, _ := n.readyz(); return code == http.StatusOK })
	web := n.pod("web")
	if web.Annotations["podmin.dev/revision"] == "" || web.Annotations["podmin.dev/service"] != "web" || web.Annotations["podmin.dev/local"] != "token" {
		t.Fatalf("web annotations %v", web.Annotations)
	}
	if !slices.ContainsFunc(web.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == "/var/run/podmin/local" && m.ReadOnly
	}) {
		t.Fatalf("web mounts %+v", web.Spec.Containers[0].VolumeMounts)
	}
	if b, err := os.ReadFile(filepath.Join(n.root, "run", "podmin", "workloads", "web", "secrets", "local", "token")); err != nil || string(b) != "s3cret" {
		t.Fatalf("mounted value %q, %v", b, err)
	}

	// Update: the file is replaced by a rename, never rewritten in place.
	before, _ := os.Stat(filepath.Join(n.manifests(), "web.yaml"))
	n.podminOK("deploy", "web", "-g", "workers", "-f", init, "--image", "web=hello:v2")
	n.eventually("web updated", func() bool {
		b, _ := os.ReadFile(filepath.Join(n.manifests(), "web.yaml"))
		return strings.Contains(string(b), "hello:v2")
	})
	after, _ := os.Stat(filepath.Join(n.manifests(), "web.yaml"))
	if os.SameFile(before, after) {
		t.Fatal("web.yaml was modified in place")
	}
	if n.pod("web").Annotations["podmin.dev/revision"] == web.Annotations["podmin.dev/revision"] {
		t.Fatal("the revision did not change")
	}

	// Delete.
	n.podminOK("delete", "api", "-g", "workers", "--yes")
	n.eventually("api removed", func() bool { return slices.Equal(n.staticPods(), []string{"web.yaml"}) })

	// A clean SIGTERM, then a corrupt payload found by a restarted agent:
	// the last valid state stays and /readyz says why.
	n.stopAgent()
	n.podminOK("deploy", "web", "-g", "workers", "-f", init, "--image", "web=hello:v3")
	ix, _, err := state.ReadIndex(context.Background(), localBucket(n.bucket))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey("workers", "web")
	e, _ := ix.Lookup(k)
	payload := filepath.Join(n.bucket, e.Pod)
	good, _ := os.ReadFile(payload)
	if err := os.WriteFile(payload, []byte(strings.ReplaceAll(string(good), "hello:v3", "evil:v3")), 0o644); err != nil {
		t.Fatal(err)
	}
	n.startAgent("workers")
	n.eventually("unready with the reason", func() bool {
		code, body := n.readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "payload does not match its digest")
	})
	if p := n.pod("web"); p.Spec.Containers[0].Image != "registry.podmin.internal/apps/hello:v2" {
		t.Fatalf("the last valid Pod was replaced: image %s", p.Spec.Containers[0].Image)
	}
	if err := os.WriteFile(payload, good, 0o644); err != nil {
		t.Fatal(err)
	}
	n.eventually("recovery", func() bool {
		code, _ := n.readyz()
		b, _ := os.ReadFile(filepath.Join(n.manifests(), "web.yaml"))
		return code == http.StatusOK && strings.Contains(string(b), "hello:v3")
	})
	if b, _ := os.ReadFile(foreign); string(b) != "foreign" {
		t.Fatal("a file outside the Podmin manifests directory was touched")
	}

	// podmin preview renders byte-identical files with the same
	// transformation, but for the podmin.dev/incarnation the node draws
	// for each run of a revision.
	rendered := filepath.Join(n.dir, "rendered")
	n.podminOK("preview", "-g", "workers", "--out", rendered)
	incarnation := regexp.MustCompile(`(?m)^\s*podmin\.dev/incarnation: [0-9a-f]{16}\n`)
	for _, f := range n.staticPods() {
		want, _ := os.ReadFile(filepath.Join(n.manifests(), f))
		if !incarnation.Match(want) {
			t.Fatalf("the node's %s has no podmin.dev/incarnation:\n%s", f, want)
		}
		want = incarnation.ReplaceAll(want, nil)
		got, err := os.ReadFile(filepath.Join(rendered, f))
		if err != nil || string(got) != string(want) {
			t.Fatalf("preview of %s differs from the node's file (%v):\n%s\n---\n%s", f, err, got, want)
		}
	}
	n.stopAgent()
}
