// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package ec2test

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// FakeEC2 is a fake of the EC2 API speaking the real Query protocol
// (form-encoded POST, XML responses and errors), so the real SDK client
// talks to it. It holds only what the checks read.
type FakeEC2 struct {
	mu sync.Mutex
	// Region names the fake's region.
	Region  string
	Zones   []Zone
	Types   map[string]InstanceType
	Images  []Image
	VPCs    []VPC
	Subnets []Subnet
	// InternetGateways are attached to their VPC.
	InternetGateways []InternetGateway
	// NotOffered lists "zone/type" pairs DescribeInstanceTypeOfferings
	// leaves out; every other type is offered in every zone.
	NotOffered map[string]bool
	// Calls records each Action, in order.
	Calls []string
}

// Zone is an availability zone.
type Zone struct{ Name, State string }

// InstanceType is what DescribeInstanceTypes reports.
type InstanceType struct {
	Hypervisor string
	IPv6       bool
	MaxENIs    int
	Arch       string // arm64 or x86_64
}

// Image is an AMI.
type Image struct{ ID, Name, Arch, Created, Owner string }

// VPC is a VPC with its primary CIDR, IPv6 /56, DNS attributes and tags.
type VPC struct {
	ID, CIDR                 string
	IPv6, IPv6Pool           string
	DNSSupport, DNSHostnames bool
	Tags                     map[string]string
}

// Subnet is a subnet's IPv6 /64 and, when set, its IPv4 CIDR and tags.
type Subnet struct {
	ID, VPC, IPv6, CIDR string
	Tags                map[string]string
}

// InternetGateway is an internet gateway attached to VPC.
type InternetGateway struct{ ID, VPC string }

// debianOwner publishes the official Debian AMIs.
const debianOwner = "136693071363"

// New returns a fake region us-west-2 with zones, instance types and
// Debian images; tests add VPCs and subnets.
func New() *FakeEC2 {
	return &FakeEC2{
		Region: "us-west-2",
		Zones:  []Zone{{"us-west-2b", "available"}, {"us-west-2a", "available"}, {"us-west-2c", "available"}, {"us-west-2d", "impaired"}},
		Types: map[string]InstanceType{
			"t4g.nano":  {"nitro", true, 2, "arm64"},
			"t4g.small": {"nitro", true, 3, "arm64"},
			"c8g.large": {"nitro", true, 3, "arm64"},
			"m7i.large": {"nitro", true, 3, "x86_64"},
			"t2.micro":  {"xen", true, 2, "x86_64"},
			"a1.medium": {"nitro", false, 1, "arm64"},
		},
		Images: []Image{
			{"ami-arm-old", "debian-13-arm64-20260901-2200", "arm64", "2026-09-01T22:00:00.000Z", debianOwner},
			{"ami-arm-new", "debian-13-arm64-20261115-2300", "arm64", "2026-11-15T23:00:00.000Z", debianOwner},
			{"ami-arm-daily", "debian-13-arm64-daily-20261201-0100", "arm64", "2026-12-01T01:00:00.000Z", debianOwner},
			{"ami-amd-new", "debian-13-amd64-20261115-2300", "x86_64", "2026-11-15T23:00:00.000Z", debianOwner},
			{"ami-impostor", "debian-13-arm64-20261201-0000", "arm64", "2026-12-01T00:00:00.000Z", "999999999999"},
		},
	}
}

// NewIn returns New's fake in another region: the same zones, renamed.
func NewIn(region string) *FakeEC2 {
	f := New()
	f.Region = region
	for i := range f.Zones {
		f.Zones[i].Name = region + f.Zones[i].Name[len(f.Zones[i].Name)-1:]
	}
	return f
}

// Client returns the real SDK client pointed at the fake.
func (f *FakeEC2) Client(t *testing.T) *ec2.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return ec2.New(ec2.Options{Region: f.Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")})
}

// ServeHTTP implements http.Handler.
func (f *FakeEC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		f.fail(w, 400, "MalformedQueryString", "not a Query protocol request")
		return
	}
	q := r.PostForm
	if q.Get("Version") != "2016-11-15" {
		f.fail(w, 400, "InvalidParameterValue", "bad Version "+q.Get("Version"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	action := q.Get("Action")
	f.Calls = append(f.Calls, action)
	var body string
	switch action {
	case "DescribeAvailabilityZones":
		var b strings.Builder
		for _, z := range f.Zones {
			fmt.Fprintf(&b, "<item><zoneName>%s</zoneName><zoneState>%s</zoneState><regionName>%s</regionName><zoneType>availability-zone</zoneType></item>", z.Name, z.State, f.Region)
		}
		body = "<availabilityZoneInfo>" + b.String() + "</availabilityZoneInfo>"
	case "DescribeInstanceTypes":
		var b strings.Builder
		for _, name := range listParam(q, "InstanceType") {
			it, ok := f.Types[name]
			if !ok {
				f.fail(w, 400, "InvalidInstanceType", fmt.Sprintf("The following supplied instance types do not exist: [%s]", name))
				return
			}
			fmt.Fprintf(&b, "<item><instanceType>%s</instanceType><hypervisor>%s</hypervisor><processorInfo><supportedArchitectures><item>%s</item></supportedArchitectures></processorInfo><networkInfo><ipv6Supported>%t</ipv6Supported><maximumNetworkInterfaces>%d</maximumNetworkInterfaces></networkInfo></item>",
				name, it.Hypervisor, it.Arch, it.IPv6, it.MaxENIs)
		}
		body = "<instanceTypeSet>" + b.String() + "</instanceTypeSet>"
	case "DescribeInstanceTypeOfferings":
		if q.Get("LocationType") != "availability-zone" {
			f.fail(w, 400, "InvalidParameterValue", "unsupported LocationType "+q.Get("LocationType"))
			return
		}
		filters := filterParams(q)
		var b strings.Builder
		for _, zone := range filters["location"] {
			for _, typ := range filters["instance-type"] {
				if _, ok := f.Types[typ]; ok && !f.NotOffered[zone+"/"+typ] {
					fmt.Fprintf(&b, "<item><instanceType>%s</instanceType><locationType>availability-zone</locationType><location>%s</location></item>", typ, zone)
				}
			}
		}
		body = "<instanceTypeOfferingSet>" + b.String() + "</instanceTypeOfferingSet>"
	case "DescribeImages":
		owners, ids := listParam(q, "Owner"), listParam(q, "ImageId")
		filters := filterParams(q)
		var b strings.Builder
		for _, img := range f.Images {
			if len(owners) > 0 && !contains(owners, img.Owner) || len(ids) > 0 && !contains(ids, img.ID) || !globAny(filters["name"], img.Name) ||
				len(filters["architecture"]) > 0 && !contains(filters["architecture"], img.Arch) {
				continue
			}
			fmt.Fprintf(&b, "<item><imageId>%s</imageId><name>%s</name><architecture>%s</architecture><creationDate>%s</creationDate><imageState>available</imageState><imageOwnerId>%s</imageOwnerId></item>",
				img.ID, img.Name, img.Arch, img.Created, img.Owner)
		}
		body = "<imagesSet>" + b.String() + "</imagesSet>"
	case "DescribeVpcs":
		ids := listParam(q, "VpcId")
		filters := filterParams(q)
		var b strings.Builder
		found := false
		for _, v := range f.VPCs {
			if len(ids) > 0 && !contains(ids, v.ID) || len(filters["cidr"]) > 0 && !contains(filters["cidr"], v.CIDR) {
				continue
			}
			found = true
			b.WriteString(vpcXML(v))
		}
		if len(ids) > 0 && !found {
			f.fail(w, 400, "InvalidVpcID.NotFound", fmt.Sprintf("The vpc ID '%s' does not exist", ids[0]))
			return
		}
		body = "<vpcSet>" + b.String() + "</vpcSet>"
	case "DescribeVpcAttribute":
		v, ok := f.vpc(q.Get("VpcId"))
		if !ok {
			f.fail(w, 400, "InvalidVpcID.NotFound", "no such VPC")
			return
		}
		attr := q.Get("Attribute")
		on := v.DNSSupport
		if attr == "enableDnsHostnames" {
			on = v.DNSHostnames
		}
		body = fmt.Sprintf("<vpcId>%s</vpcId><%s><value>%t</value></%s>", v.ID, attr, on, attr)
	case "DescribeSubnets":
		vpcs := filterParams(q)["vpc-id"]
		var b strings.Builder
		for _, s := range f.Subnets {
			if !contains(vpcs, s.VPC) {
				continue
			}
			fmt.Fprintf(&b, "<item><subnetId>%s</subnetId><vpcId>%s</vpcId>", s.ID, s.VPC)
			if s.CIDR != "" {
				fmt.Fprintf(&b, "<cidrBlock>%s</cidrBlock>", s.CIDR)
			}
			if s.IPv6 != "" {
				fmt.Fprintf(&b, "<ipv6CidrBlockAssociationSet><item><ipv6CidrBlock>%s</ipv6CidrBlock><ipv6CidrBlockState><state>associated</state></ipv6CidrBlockState></item></ipv6CidrBlockAssociationSet>", s.IPv6)
			}
			b.WriteString(tagSetXML(s.Tags))
			b.WriteString("</item>")
		}
		body = "<subnetSet>" + b.String() + "</subnetSet>"
	case "DescribeInternetGateways":
		vpcs := filterParams(q)["attachment.vpc-id"]
		var b strings.Builder
		for _, g := range f.InternetGateways {
			if len(vpcs) == 0 || contains(vpcs, g.VPC) {
				fmt.Fprintf(&b, "<item><internetGatewayId>%s</internetGatewayId><attachmentSet><item><vpcId>%s</vpcId><state>available</state></item></attachmentSet></item>", g.ID, g.VPC)
			}
		}
		body = "<internetGatewaySet>" + b.String() + "</internetGatewaySet>"
	default:
		f.fail(w, 400, "InvalidAction", "The action "+action+" is not valid for this web service.")
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>fake-request</requestId>%s</%sResponse>`, action, body, action)
}

func (f *FakeEC2) vpc(id string) (VPC, bool) {
	for _, v := range f.VPCs {
		if v.ID == id {
			return v, true
		}
	}
	return VPC{}, false
}

func vpcXML(v VPC) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<item><vpcId>%s</vpcId><cidrBlock>%s</cidrBlock><state>available</state>", v.ID, v.CIDR)
	if v.IPv6 != "" {
		fmt.Fprintf(&b, "<ipv6CidrBlockAssociationSet><item><ipv6CidrBlock>%s</ipv6CidrBlock><ipv6CidrBlockState><state>associated</state></ipv6CidrBlockState><ipv6Pool>%s</ipv6Pool></item></ipv6CidrBlockAssociationSet>", v.IPv6, v.IPv6Pool)
	}
	b.WriteString(tagSetXML(v.Tags))
	b.WriteString("</item>")
	return b.String()
}

// tagSetXML renders tags in key order.
func tagSetXML(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("<tagSet>")
	for _, k := range keys {
		fmt.Fprintf(&b, "<item><key>%s</key><value>%s</value></item>", xmlEscape(k), xmlEscape(tags[k]))
	}
	b.WriteString("</tagSet>")
	return b.String()
}

func (f *FakeEC2) fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fake-request</RequestID></Response>`, code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// listParam reads Name.1, Name.2, … of a Query request.
func listParam(q url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := q[fmt.Sprintf("%s.%d", name, i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// filterParams reads Filter.N.Name and Filter.N.Value.M.
func filterParams(q url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name := q.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return out
		}
		out[name] = listParam(q, fmt.Sprintf("Filter.%d.Value", i))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// globAny matches EC2's filter wildcards (only a trailing * is used here);
// no patterns match everything.
func globAny(patterns []string, s string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if pre, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(s, pre) || p == s {
			return true
		}
	}
	return false
}
