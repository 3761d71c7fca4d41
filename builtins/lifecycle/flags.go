// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/otellogs"
	"podmin.dev/podmin/internal/scrub"
)

// SetupOptions are the inputs of setup; field names follow the flags
// (--vpc-cidr, --nat64, --nodegroup, --workload-ca-publish, --otel-logs,
// --agent-source). Every value is validated before anything is written or
// run.
type SetupOptions struct {
	// VPCCIDR is the private IPv4 primary CIDR of the VPC.
	VPCCIDR string
	// NAT64 is empty or "false" (no NAT64), "true" (shared NAT64 on
	// t4g.nano) or "instance-type=TYPE".
	NAT64 string
	// NodeGroup lists NAME[,size=N,disk-size=GIB,instance-type=T,zone=Z,nat64=T]
	// values; the list is authoritative.
	NodeGroup []string
	// WorkloadCAPublish is s3://BUCKET/KEY, or empty.
	WorkloadCAPublish string
	// OtelLogs is endpoint=URL[,protocol=http|grpc][,mtls=true][,ca=s3://B/K][,headers-secret=true],
	// or empty.
	OtelLogs string
	// AgentSource is a Podmin checkout to cross-compile the agent from, or
	// empty for the published agent.
	AgentSource string
	// Confirm is asked after the plan is shown and before anything is
	// applied; nil means already confirmed (--yes, confirm= in a script).
	Confirm func(plan PlanSummary) error
}

// ErrInvalidSetup marks a setup flag value that breaks a rule; nothing was
// written or run.
var ErrInvalidSetup = errors.New("invalid setup")

func invalid(format string, args ...any) error {
	// The values quoted pass the scrubber's quoting, like all input.
	return fmt.Errorf("%w: %s", ErrInvalidSetup, scrub.QuoteSpans(fmt.Sprintf(format, args...)))
}

var (
	instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	fullZoneRE     = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`)
	// The private IPv4 ranges of RFC 1918, the only VPC CIDRs setup takes.
	privateIPv4 = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
	}
)

const (
	cidrRule  = "use a private IPv4 network (inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16) with a prefix length from /16 through /28 and no host bits set, e.g. 10.0.0.0/16"
	sizeRule  = "use an integer from 0 through 1000"
	diskRule  = "use an integer number of GiB from 8 through 16384"
	typeRule  = "use an EC2 instance type such as t4g.small or c8g.large"
	zoneRule  = "use a full availability zone name such as us-west-2b or one lowercase suffix letter such as b"
	nat64Rule = "use --nat64 alone (t4g.nano) or --nat64=instance-type=TYPE"
)

// parseSetup validates every flag value of setup for context c and returns
// the cluster it describes. It reads nothing but the agent source
// directory, and writes nothing.
func parseSetup(opts SetupOptions, c contexts.Context) (infra.Cluster, error) {
	cl := infra.Cluster{ID: c.Cluster, Provider: c.Provider, Region: c.Region, Bucket: c.Bucket}
	local := c.Provider == "local"
	if local {
		if opts.VPCCIDR != "" {
			return cl, invalid("--vpc-cidr %q: the local provider has no VPC: omit --vpc-cidr on a local context", opts.VPCCIDR)
		}
	} else {
		cidr, err := parseVPCCIDR(opts.VPCCIDR)
		if err != nil {
			return cl, err
		}
		cl.VPCCIDR = cidr
	}
	nat, err := parseNAT64(opts.NAT64)
	if err != nil {
		return cl, err
	}
	if local && nat != "" {
		return cl, invalid("--nat64 %q: the local provider has no NAT64 instances: omit --nat64 on a local context", opts.NAT64)
	}
	cl.NAT64 = nat
	if len(opts.NodeGroup) == 0 {
		return cl, invalid("no --nodegroup given: the NodeGroup list is authoritative, so name every NodeGroup the cluster keeps, e.g. --nodegroup default")
	}
	seen := map[string]bool{}
	for _, raw := range opts.NodeGroup {
		ng, err := parseNodeGroup(raw, c.Region, local)
		if err != nil {
			return cl, err
		}
		if seen[ng.Name] {
			return cl, invalid("--nodegroup %q: NodeGroup %q is given twice: name each NodeGroup once", raw, ng.Name)
		}
		seen[ng.Name] = true
		cl.NodeGroups = append(cl.NodeGroups, ng)
	}
	if opts.WorkloadCAPublish != "" {
		o, err := parseS3Object(opts.WorkloadCAPublish)
		if err != nil {
			return cl, invalid("--workload-ca-publish %q: %v", opts.WorkloadCAPublish, err)
		}
		cl.WorkloadCAPublish = &o
	}
	if opts.OtelLogs != "" {
		o, err := parseOtelLogs(opts.OtelLogs)
		if err != nil {
			return cl, err
		}
		cl.OtelLogs = o
	}
	if opts.AgentSource != "" {
		if err := checkAgentSource(opts.AgentSource); err != nil {
			return cl, err
		}
		cl.AgentSource = opts.AgentSource
	}
	return cl, nil
}

func parseVPCCIDR(s string) (string, error) {
	if s == "" {
		return "", invalid("--vpc-cidr is required: %s", cidrRule)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return "", invalid("--vpc-cidr %q is not an IPv4 CIDR: %s", s, cidrRule)
	}
	if p.Masked() != p {
		return "", invalid("--vpc-cidr %q has host bits set (the network is %s): %s", s, p.Masked(), cidrRule)
	}
	if p.Bits() < 16 || p.Bits() > 28 {
		return "", invalid("--vpc-cidr %q is a /%d: %s", s, p.Bits(), cidrRule)
	}
	for _, r := range privateIPv4 {
		if r.Contains(p.Addr()) && r.Bits() <= p.Bits() {
			return p.String(), nil
		}
	}
	return "", invalid("--vpc-cidr %q is not a private IPv4 network: %s", s, cidrRule)
}

func parseNAT64(s string) (string, error) {
	switch s {
	case "", "false":
		return "", nil
	case "true":
		return infra.DefaultNAT64Type, nil
	}
	k, v, ok := strings.Cut(s, "=")
	if !ok || k != "instance-type" {
		return "", invalid("--nat64 %q: %s", s, nat64Rule)
	}
	if !instanceTypeRE.MatchString(v) {
		return "", invalid("--nat64 %q: instance type %q is not valid: %s", s, v, typeRule)
	}
	return v, nil
}

// parseNodeGroup parses NAME[,key=value...].
func parseNodeGroup(raw, region string, local bool) (infra.NodeGroup, error) {
	parts := strings.Split(raw, ",")
	ng := infra.NodeGroup{Name: parts[0], Size: infra.DefaultSize, DiskSize: infra.DefaultDiskSize}
	if err := ids.ValidateNodeGroup(ng.Name); err != nil {
		return ng, invalid("--nodegroup %q: %v", raw, err)
	}
	if !local {
		ng.InstanceType = infra.DefaultInstanceType
	}
	given := map[string]bool{}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return ng, invalid("--nodegroup %q: %q is not KEY=VALUE: use NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE]", raw, kv)
		}
		if given[k] {
			return ng, invalid("--nodegroup %q: %s is given twice: give each setting once", raw, k)
		}
		given[k] = true
		if local && k != "size" {
			return ng, invalid("--nodegroup %q: %s does not apply to the local provider, which runs node agents on this machine: only size= is accepted", raw, k)
		}
		switch k {
		case "size":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > infra.MaxSize {
				return ng, invalid("--nodegroup %q: size %q is not valid: %s", raw, v, sizeRule)
			}
			ng.Size = n
		case "disk-size":
			n, err := strconv.Atoi(v)
			if err != nil || n < infra.MinDiskSize || n > infra.MaxDiskSize {
				return ng, invalid("--nodegroup %q: disk-size %q is not valid: %s", raw, v, diskRule)
			}
			ng.DiskSize = n
		case "instance-type":
			if !instanceTypeRE.MatchString(v) {
				return ng, invalid("--nodegroup %q: instance-type %q is not valid: %s", raw, v, typeRule)
			}
			ng.InstanceType = v
		case "zone":
			z, err := resolveZoneName(v, region)
			if err != nil {
				return ng, invalid("--nodegroup %q: %v", raw, err)
			}
			ng.Zone = z
		case "nat64":
			if !instanceTypeRE.MatchString(v) {
				return ng, invalid("--nodegroup %q: nat64 %q is not valid: %s for a dedicated NAT64 instance", raw, v, typeRule)
			}
			ng.NAT64 = v
		default:
			return ng, invalid("--nodegroup %q: unknown setting %q: use size, disk-size, instance-type, zone or nat64", raw, k)
		}
	}
	return ng, nil
}

// resolveZoneName turns a suffix letter into the region's zone name and
// checks that a full name belongs to region. Whether the zone exists is the
// provider API's answer, asked later.
func resolveZoneName(z, region string) (string, error) {
	if len(z) == 1 && z[0] >= 'a' && z[0] <= 'z' {
		return region + z, nil
	}
	if !fullZoneRE.MatchString(z) {
		return "", fmt.Errorf("zone %q is not valid: %s", z, zoneRule)
	}
	if region != "" && (!strings.HasPrefix(z, region) || len(z) != len(region)+1) {
		return "", fmt.Errorf("zone %q is not in the cluster's region %s: %s", z, region, zoneRule)
	}
	return z, nil
}

func parseS3Object(s string) (infra.S3Object, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return infra.S3Object{}, errors.New("not an s3:// URL: use s3://BUCKET/KEY")
	}
	b, k, _ := strings.Cut(rest, "/")
	if err := cloud.ValidateS3BucketName(b); err != nil {
		return infra.S3Object{}, fmt.Errorf("%v: use s3://BUCKET/KEY", err)
	}
	if k == "" || strings.HasSuffix(k, "/") {
		return infra.S3Object{}, errors.New("names no object: use s3://BUCKET/KEY with an exact key that does not end in /")
	}
	return infra.S3Object{Bucket: b, Key: k}, nil
}

// parseOtelLogs validates --otel-logs with the one parser the nodes share
// (otellogs.Parse) and returns its canonical form.
func parseOtelLogs(s string) (string, error) {
	o, err := otellogs.Parse(s)
	if err != nil {
		msg := err.Error()
		if m, ok := strings.CutPrefix(msg, "--otel-logs: "); ok {
			msg = m
		} else if m, ok := strings.CutPrefix(msg, "--otel-logs "); ok {
			msg = m
		}
		return "", invalid("--otel-logs %q: %s", s, msg)
	}
	return o.String(), nil
}

// checkAgentSource requires a Podmin checkout: a directory whose go.mod
// declares the podmin.dev/podmin module, which holds cmd/podmin-agent and
// the compiled eBPF program its agent embeds.
func checkAgentSource(dir string) error {
	const rule = "pass the root of a Podmin source checkout (its go.mod declares module podmin.dev/podmin)"
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return invalid("--agent-source %q is not a directory: %s", dir, rule)
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return invalid("--agent-source %q has no go.mod: %s", dir, rule)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			if fields[1] != "podmin.dev/podmin" {
				return invalid("--agent-source %q is module %s: %s", dir, fields[1], rule)
			}
			if st, err := os.Stat(filepath.Join(dir, "cmd", "podmin-agent")); err != nil || !st.IsDir() {
				return invalid("--agent-source %q has no cmd/podmin-agent: %s", dir, rule)
			}
			if err := deps.CheckAgentSource(dir); err != nil {
				return invalid("--agent-source: %v", err)
			}
			return nil
		}
	}
	return invalid("--agent-source %q: go.mod declares no module: %s", dir, rule)
}

// CheckSetupSyntax checks what setup's values must satisfy on every
// provider — NodeGroup names, NAME[,KEY=VALUE…] with known keys and values
// in range, each NodeGroup once, --nat64, --workload-ca-publish and
// --otel-logs — without a context, so that a command can refuse bad usage
// before it reads any context or network. Provider-specific rules (what
// the local provider accepts, a zone of the context's region) are checked
// again by setup itself.
func CheckSetupSyntax(opts SetupOptions) error {
	seen := map[string]bool{}
	for _, raw := range opts.NodeGroup {
		ng, err := parseNodeGroup(raw, "", false)
		if err != nil {
			return err
		}
		if seen[ng.Name] {
			return invalid("--nodegroup %q: NodeGroup %q is given twice: name each NodeGroup once", raw, ng.Name)
		}
		seen[ng.Name] = true
	}
	if _, err := parseNAT64(opts.NAT64); err != nil {
		return err
	}
	if opts.WorkloadCAPublish != "" {
		if _, err := parseS3Object(opts.WorkloadCAPublish); err != nil {
			return err
		}
	}
	if opts.OtelLogs != "" {
		if _, err := parseOtelLogs(opts.OtelLogs); err != nil {
			return err
		}
	}
	return nil
}
