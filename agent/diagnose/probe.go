// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultProbeTimeout bounds one probe whose spec sets no timeout
// (kubelet's default is one second).
const DefaultProbeTimeout = time.Second

// Probe runs the readiness probe of container c of pod once from the node
// and returns a description of the probe ("HTTPS GET https://[addr]:8443/healthz")
// and its failure, nil when it succeeded. An exec probe is described and
// not run (errExecProbe).
func Probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (string, error) {
	p := c.ReadinessProbe
	if p == nil {
		return "", errors.New("no readiness probe")
	}
	timeout := DefaultProbeTimeout
	if p.TimeoutSeconds > 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return probeHTTP(ctx, pod, c, p.HTTPGet)
	case p.TCPSocket != nil:
		host, err := probeHost(pod, p.TCPSocket.Host)
		if err != nil {
			return "TCP", err
		}
		port, err := resolvePort(c, p.TCPSocket.Port)
		if err != nil {
			return "TCP", err
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		desc := "TCP connect to " + addr
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return desc, plain(err)
		}
		return desc, conn.Close()
	case p.GRPC != nil:
		host, err := probeHost(pod, "")
		if err != nil {
			return "gRPC", err
		}
		addr := net.JoinHostPort(host, strconv.Itoa(int(p.GRPC.Port)))
		desc := "gRPC health check of " + addr
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
			desc += " (service " + strconv.Quote(service) + ")"
		}
		return desc, probeGRPC(ctx, addr, service)
	case p.Exec != nil:
		return "exec " + strings.Join(p.Exec.Command, " "), errExecProbe
	}
	return "", errors.New("a readiness probe of no known kind")
}

// errExecProbe marks a probe the node cannot run from outside the
// container.
var errExecProbe = errors.New("an exec probe runs inside the container: the node cannot try it; see crictl exec")

func probeHTTP(ctx context.Context, pod *corev1.Pod, c *corev1.Container, g *corev1.HTTPGetAction) (string, error) {
	host, err := probeHost(pod, g.Host)
	if err != nil {
		return "HTTP", err
	}
	port, err := resolvePort(c, g.Port)
	if err != nil {
		return "HTTP", err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
	desc := strings.ToUpper(scheme) + " GET " + url
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return desc, err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// Like kubelet: no certificate checks, no keep-alive, no proxy.
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // kubelet's probes do not verify either
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return desc, plain(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if b := strings.TrimSpace(string(body)); b != "" {
			msg += ": " + strings.ToValidUTF8(b, "?")
		}
		return desc, errors.New(msg)
	}
	return desc, nil
}

func probeGRPC(ctx context.Context, addr, service string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("status %s", s)
	}
	return nil
}

// probeHost is the probe's host: its own, else the Pod's first address.
func probeHost(pod *corev1.Pod, host string) (string, error) {
	if host != "" {
		return host, nil
	}
	ip := pod.Status.PodIP
	if ip == "" && len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	if _, err := netip.ParseAddr(ip); err != nil {
		return "", errors.New("kubelet reports no address of the Pod yet")
	}
	return ip, nil
}

// resolvePort turns a probe's port, a number or a container port's name,
// into a number.
func resolvePort(c *corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("the probe names port %q, which container %s does not declare", port.StrVal, c.Name)
}

// plain strips Go's operation prefixes from a network error: "connection
// refused", not "dial tcp [...]:8443: connect: connection refused".
func plain(err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return errors.New("no answer within the probe's timeout")
	}
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return sys.Err
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
