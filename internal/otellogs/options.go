// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package otellogs

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// FluentBitConfigRoute is the route of the node agent's loopback health
// server (127.0.0.1:8082) that Fluent Bit's systemd unit POSTs to before
// every start: the agent reads the headers secret afresh and rewrites the
// configuration, so a rotated secret reaches the next start.
const FluentBitConfigRoute = "/fluent-bit/config"

// Protocols of the exporter.
const (
	// HTTP is OTLP/HTTP with protobuf bodies, the default.
	HTTP = "http"
	// GRPC is OTLP/gRPC.
	GRPC = "grpc"
)

// Options are the parsed value of setup's --otel-logs.
type Options struct {
	// Endpoint is the exact https URL; for HTTP it is the signal URL
	// (path included), used as given.
	Endpoint *url.URL
	// Protocol is HTTP or GRPC.
	Protocol string
	// MTLS makes the node present its telemetry client certificate.
	MTLS bool
	// CA is the exact s3://BUCKET/KEY of the private server CA bundle;
	// empty trusts the operating system's roots.
	CA string
	// HeadersSecret sends the headers stored at
	// /<cluster>/_system/otel-logs-headers.
	HeadersSecret bool
}

// Host is the endpoint's host without brackets or port.
func (o Options) Host() string { return o.Endpoint.Hostname() }

// Port is the endpoint's port, 443 when the URL names none.
func (o Options) Port() int {
	if p := o.Endpoint.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	return 443
}

// URI is the request path (and query) Fluent Bit sends to: exactly the
// URL's for HTTP, and the OTLP/gRPC logs method for gRPC.
func (o Options) URI() string {
	if o.Protocol == GRPC {
		return "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
	}
	return o.Endpoint.RequestURI()
}

// CABucketKey splits CA into bucket and key; ok is false without a CA.
func (o Options) CABucketKey() (bucket, key string, ok bool) {
	rest, found := strings.CutPrefix(o.CA, "s3://")
	if !found {
		return "", "", false
	}
	bucket, key, _ = strings.Cut(rest, "/")
	return bucket, key, true
}

// String renders the options in the --otel-logs form Parse reads.
func (o Options) String() string {
	parts := []string{"endpoint=" + o.Endpoint.String()}
	if o.Protocol != HTTP {
		parts = append(parts, "protocol="+o.Protocol)
	}
	if o.MTLS {
		parts = append(parts, "mtls=true")
	}
	if o.CA != "" {
		parts = append(parts, "ca="+o.CA)
	}
	if o.HeadersSecret {
		parts = append(parts, "headers-secret=true")
	}
	return strings.Join(parts, ",")
}

var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// Parse reads "endpoint=URL[,protocol=http|grpc][,mtls=true][,ca=s3://BUCKET/KEY][,headers-secret=true]".
// The endpoint must be https (certificate and hostname verification are
// mandatory) without credentials or a fragment; an HTTP endpoint must
// name its signal path (e.g. /v1/logs), a gRPC one must not have any.
func Parse(value string) (Options, error) {
	o := Options{Protocol: HTTP}
	if strings.TrimSpace(value) == "" {
		return o, fmt.Errorf("--otel-logs needs endpoint=URL, e.g. --otel-logs endpoint=https://otlp.example.com/v1/logs")
	}
	seen := map[string]bool{}
	var endpoint string
	for _, part := range strings.Split(value, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || v == "" {
			return o, fmt.Errorf("--otel-logs: %q is not KEY=VALUE: use endpoint=URL[,protocol=http|grpc][,mtls=true][,ca=s3://BUCKET/KEY][,headers-secret=true]", part)
		}
		if seen[k] {
			return o, fmt.Errorf("--otel-logs: %s is given twice", k)
		}
		seen[k] = true
		switch k {
		case "endpoint":
			endpoint = v
		case "protocol":
			if v != HTTP && v != GRPC {
				return o, fmt.Errorf("--otel-logs: protocol=%s: use http (OTLP/HTTP protobuf, the default) or grpc", v)
			}
			o.Protocol = v
		case "mtls", "headers-secret":
			b, err := parseBool(k, v)
			if err != nil {
				return o, err
			}
			if k == "mtls" {
				o.MTLS = b
			} else {
				o.HeadersSecret = b
			}
		case "ca":
			if err := checkCA(v); err != nil {
				return o, err
			}
			o.CA = v
		default:
			return o, fmt.Errorf("--otel-logs: unknown key %q: use endpoint, protocol, mtls, ca or headers-secret", k)
		}
	}
	if endpoint == "" {
		return o, fmt.Errorf("--otel-logs needs endpoint=URL, e.g. endpoint=https://otlp.example.com/v1/logs")
	}
	u, err := checkEndpoint(endpoint, o.Protocol)
	if err != nil {
		return o, err
	}
	o.Endpoint = u
	return o, nil
}

func parseBool(k, v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("--otel-logs: %s=%s: use %s=true or %s=false", k, v, k, k)
}

func checkEndpoint(s, protocol string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--otel-logs: endpoint %q is not a URL: %v", s, err)
	}
	switch {
	case u.Scheme != "https":
		return nil, fmt.Errorf("--otel-logs: endpoint %q must be https: TLS certificate and hostname verification are mandatory", s)
	case u.User != nil:
		return nil, fmt.Errorf("--otel-logs: endpoint must not hold credentials: store them as headers with \"podmin secret create otel-logs-headers --system\" and pass headers-secret=true")
	case u.Hostname() == "" || u.Opaque != "":
		return nil, fmt.Errorf("--otel-logs: endpoint %q names no host", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, fmt.Errorf("--otel-logs: endpoint %q must not have a #fragment", s)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("--otel-logs: endpoint %q has an invalid port", s)
		}
	}
	if strings.ContainsAny(u.Hostname(), " \t") || (strings.Contains(u.Hostname(), ":") && net.ParseIP(u.Hostname()) == nil) {
		return nil, fmt.Errorf("--otel-logs: endpoint %q has an invalid host", s)
	}
	if protocol == HTTP && (u.Path == "" || u.Path == "/") {
		return nil, fmt.Errorf("--otel-logs: endpoint %q names no path: OTLP/HTTP uses the exact signal URL, e.g. https://%s/v1/logs", s, u.Host)
	}
	if protocol == GRPC && (u.Path != "" && u.Path != "/" || u.RawQuery != "") {
		return nil, fmt.Errorf("--otel-logs: endpoint %q has a path: an OTLP/gRPC endpoint is https://HOST[:PORT]", s)
	}
	return u, nil
}

func checkCA(v string) error {
	rest, ok := strings.CutPrefix(v, "s3://")
	bucket, key, _ := strings.Cut(rest, "/")
	if !ok || !bucketRE.MatchString(bucket) || key == "" || strings.HasSuffix(key, "/") {
		return fmt.Errorf("--otel-logs: ca=%s: use the exact object, ca=s3://BUCKET/KEY", v)
	}
	return nil
}
