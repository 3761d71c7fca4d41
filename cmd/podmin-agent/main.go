// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"podmin.dev/podmin/agent"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the agent and returns the process exit code: 0 after a
// clean shutdown, 1 for invalid configuration or a failed start, 2 for
// misuse of the command line.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
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
	fs.Usage = func() {} // --help prints the full help to stdout; misuse a short hint
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		fmt.Fprintln(stderr, "usage: podmin-agent --provider aws|local --bucket B --region R --cluster C --nodegroup G --ipv6-prefix P/80")
		fmt.Fprintln(stderr, "run podmin-agent --help for the flags, environment settings and host paths")
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
	opts, optErr := agent.OptionsFromEnv(getenv)
	if err = errors.Join(cfg.Validate(), err, optErr); err != nil {
		log.Error("invalid configuration: podmin-agent exits", "err", err)
		return 1
	}
	if cfg.Provider == "local" {
		home, _ := os.UserHomeDir()
		if dirs, err := paths.Resolve(paths.Env{GOOS: runtime.GOOS, Home: home, Getenv: getenv}); err == nil {
			opts.DataDir = dirs.Data
		}
	}
	opts.Log = log
	log.Info("configuration valid", "provider", cfg.Provider, "bucket", cfg.Bucket, "region", cfg.Region,
		"cluster", cfg.Cluster, "nodegroup", cfg.NodeGroup, "ipv6_prefix", cfg.IPv6Prefix.String(),
		"version", version.Version)
	if err := agent.Run(ctx, cfg, opts); err != nil {
		log.Error("podmin-agent failed", "err", err)
		return 1
	}
	return 0
}
