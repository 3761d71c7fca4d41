// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/oci"
)

func newBuildCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.BuildOptions
	var out string
	cmd := &cobra.Command{
		Use:   "build [PATH] -t TAG [-t TAG...] [--platform OS/ARCH...] [-f FILE] [--pull]",
		Short: "Build an image from a Containerfile into the local image store",
		Long: `Build packages files from the build context PATH (default ".") into an image,
without a daemon, and stores it in the local image store as an OCI image index,
also for one platform, so more architectures can be added under the same tag.

It understands FROM (one stage; ARG expansion including TARGETOS, TARGETARCH,
TARGETVARIANT and TARGETPLATFORM), ARG, ENV, LABEL, WORKDIR, COPY (--chown with
numeric IDs, --chmod, globs, .dockerignore), ENTRYPOINT and CMD. RUN, ADD and
multi-stage builds are refused: prepare files on the host and COPY them.
FROM scratch images run as user 65532. Layers are reproducible: the same
context builds the same digest. Base images come from the local store first,
then from their registry (--pull always asks the registry).

Tags resolve like --image values: "hello:v1" is
registry.podmin.internal/apps/hello:v1. Push it with "podmin push hello:v1".`,
		Example: `  podmin build -t hello:v1 .
  podmin build -t hello:v1 --platform linux/amd64 --platform linux/arm64 -f Containerfile ./app`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			if len(args) == 1 {
				opts.Path = args[0]
			}
			res, err := env.Build(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printImage(cmd.OutOrStdout(), out, res)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&opts.Tag, "tag", "t", nil, "name of the image, NAME[:TAG] (repeatable)")
	f.StringArrayVar(&opts.Platform, "platform", nil, "OS/ARCH[/VARIANT] to build (repeatable; default linux/<host architecture>)")
	f.StringVarP(&opts.File, "file", "f", "", "Containerfile to use (default PATH/Containerfile, then PATH/Dockerfile)")
	f.BoolVar(&opts.Pull, "pull", false, "fetch base images from their registry even when stored locally")
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "tag")
	checkUsage(cmd, func([]string) error { return builtins.CheckBuild(opts) })
	return cmd
}

func newPullCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.PullOptions
	var out string
	cmd := &cobra.Command{
		Use:   "pull SOURCE",
		Short: "Import a complete remote image index into the local image store",
		Long: `Pull imports every platform of SOURCE from its registry into the local image
store, using your docker credentials (docker login). A single-platform image is
stored as a one-entry OCI index. Progress goes to standard error: bars on a
terminal, a plain line every few seconds otherwise.`,
		Example: `  podmin pull ghcr.io/example/web:v1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Source = args[0]
			res, err := env.Pull(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printImage(cmd.OutOrStdout(), out, res)
		},
	}
	addOutputFlag(cmd, &out)
	checkUsage(cmd, func(args []string) error {
		_, err := oci.RemoteRef(args[0])
		return err
	})
	return cmd
}

func newPushCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.PushOptions
	var out string
	cmd := &cobra.Command{
		Use:   "push SOURCE [DESTINATION] [--pull]",
		Short: "Upload an image into the cluster bucket and print its cluster reference",
		Long: `Push uploads SOURCE from the local image store (pulling it when absent; --pull
refreshes it) into the cluster bucket, where the nodes' read-only registry
serves it. Blobs go first and existing ones are skipped, then oci-layout, then
index.json is merged with a compare-and-swap write, so concurrent pushes of
other tags survive and the tag never names missing content.

DESTINATION shorthand such as hello or hello:v1 resolves beneath
registry.podmin.internal/apps/. Without DESTINATION the source's registry host
is replaced by the cluster registry, keeping repository and tag beneath apps/.
mirror/ is reserved for images setup manages.

Standard output is only the cluster image reference, ready for --image.
Progress goes to standard error: a bar per blob and a total (bytes, rate, time
left) on a terminal, a plain line every few seconds otherwise.`,
		Example: `  podmin push hello:v1
  podmin deploy web -g workers --image "$(podmin push ghcr.io/example/web:v1 web:v1)"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Source = args[0]
			if len(args) == 2 {
				opts.Destination = args[1]
			}
			res, err := env.Push(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, res.References[0])
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&opts.Pull, "pull", false, "pull SOURCE again even when it is in the local image store")
	addOutputFlag(cmd, &out)
	checkUsage(cmd, func(args []string) error {
		dst := ""
		if len(args) == 2 {
			dst = args[1]
		}
		_, err := oci.Destination(args[0], dst)
		return err
	})
	return cmd
}

func printImage(w io.Writer, format string, res builtins.ImageResult) error {
	return printResult(w, format, res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s\n%s (%s)\n", strings.Join(res.References, "\n"), res.Digest, strings.Join(res.Platforms, ", "))
		return err
	})
}
