// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command podmin-agent is the node daemon. It takes exactly six
// configuration flags and exits non-zero when any is invalid.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"

	"podmin.dev/podmin/agent"
	"podmin.dev/podmin/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("podmin-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg agent.Config
	var prefix string
	var showVersion bool
	fs.StringVar(&cfg.Provider, "provider", "", "provider of the cluster bucket: aws or local")
	fs.StringVar(&cfg.Bucket, "bucket", "", "the cluster's object storage bucket")
	fs.StringVar(&cfg.Region, "region", "", "the bucket's region")
	fs.StringVar(&cfg.Cluster, "cluster", "", "the cluster ID")
	fs.StringVar(&cfg.NodeGroup, "nodegroup", "", "this VM's NodeGroup ID")
	fs.StringVar(&prefix, "ipv6-prefix", "", "the canonical global-unicast IPv6 /80 Pod prefix of the VM's secondary ENI")
	fs.BoolVar(&showVersion, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: podmin-agent --provider aws|local --bucket B --region R --cluster C --nodegroup G --ipv6-prefix P/80")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if showVersion {
		fmt.Fprintln(stdout, "podmin-agent", version.Current().String())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "podmin-agent takes no arguments, got %q\n", fs.Args())
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	p, err := agent.ParsePrefix(prefix)
	if err != nil {
		// Report the prefix problem once, with the other fields' problems.
		p = netip.MustParsePrefix("2600::/80")
	}
	cfg.IPv6Prefix = p
	if err = errors.Join(cfg.Validate(), err); err != nil {
		log.Error("invalid configuration: podmin-agent exits", "err", err)
		return 1
	}
	log.Info("configuration valid", "provider", cfg.Provider, "bucket", cfg.Bucket, "region", cfg.Region,
		"cluster", cfg.Cluster, "nodegroup", cfg.NodeGroup, "ipv6_prefix", cfg.IPv6Prefix.String(),
		"version", version.Version)
	log.Warn("this build of podmin-agent validates its configuration only; reconciliation is not implemented yet")
	return 0
}
