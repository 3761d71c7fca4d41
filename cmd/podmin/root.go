// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/version"
)

// noContext marks commands that run without a current context (connect,
// use, version, help); every other command requires one.
const noContext = "podmin.dev/no-context"

// DefaultTimeout is the overall deadline of one command unless --timeout
// says otherwise. It is generous for pushing large images and still ends a
// command against an endpoint that never answers.
const DefaultTimeout = 10 * time.Minute

// noDeadline marks commands that run without the default deadline (the
// interactive REPL); an explicit --timeout still applies to them.
const noDeadline = "podmin.dev/no-deadline"

// noDeadlineWith names a flag that makes its command run without the
// default deadline (status --watch runs until ready or interrupted); an
// explicit --timeout still applies.
const noDeadlineWith = "podmin.dev/no-deadline-with"

// deadlineKey carries the cancel function of the command's deadline from
// the pre-run hook back to execute.
type deadlineKey struct{}

type deadlineHolder struct{ cancel context.CancelFunc }

func newRoot(env *builtins.Env) *cobra.Command {
	var timeout time.Duration
	var contextName string
	root := &cobra.Command{
		Use:   "podmin",
		Short: "Run static Kubernetes Pods on plain VMs, without a control plane",
		Long: `Podmin runs static Kubernetes Pods on plain VMs with an unmodified kubelet and
no Kubernetes control plane. This CLI writes a cluster's desired state into its
object-storage bucket; a podmin-agent on every VM reconciles it.

Start with "podmin connect CLUSTER --provider local --bucket NAME".

Every command ends after --timeout (default 10m; 0 means no deadline, and the
interactive repl has none unless --timeout is given). A request cut off by it
is named in the error together with the endpoint it went to.`,
		Example: `  podmin connect demo --provider local --bucket demo
  podmin deploy web -g workers --image "$(podmin push hello:v1)" --service
  podmin list`,
		Version:       version.Current().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := usageFirst(cmd); err != nil {
				return err
			}
			if isCompletion(cmd) {
				return nil // completion works in a fresh home, without a context
			}
			if timeout < 0 {
				return usageError{fmt.Errorf("--timeout %s: use a positive duration such as 30s or 5m, or 0 for no deadline", timeout)}
			}
			exempt := false
			for c := cmd; c != nil; c = c.Parent() {
				exempt = exempt || c.Annotations[noDeadline] == "true"
			}
			if name := cmd.Annotations[noDeadlineWith]; name != "" && cmd.Flags().Changed(name) {
				exempt = true
			}
			if timeout > 0 && (!exempt || cmd.Flags().Changed("timeout")) {
				h, ok := cmd.Context().Value(deadlineKey{}).(*deadlineHolder)
				if !ok {
					h = &deadlineHolder{} // not run through execute: the deadline ends with the process
				}
				var ctx context.Context
				ctx, h.cancel = context.WithTimeout(cmd.Context(), timeout)
				cmd.SetContext(ctx)
				env.Timeout = timeout
			}
			if err := selectContext(cmd, env, contextName); err != nil {
				return err
			}
			for c := cmd; c != nil; c = c.Parent() {
				if c.Annotations[noContext] == "true" {
					return nil
				}
			}
			if _, err := env.CurrentContext(); err != nil {
				if env.Selection.Name != "" && errors.Is(err, contexts.ErrUnknown) {
					return usageError{err}
				}
				return fmt.Errorf("%q needs a current context: %w", cmd.CommandPath(), err)
			}
			return nil
		},
	}
	root.PersistentFlags().DurationVar(&timeout, "timeout", DefaultTimeout, "overall deadline of the command, e.g. 30s or 5m; 0 means none")
	root.PersistentFlags().StringVar(&contextName, "context", "", "the saved context (cluster) this command uses, instead of "+contexts.EnvVar+" or the current context")
	// No SetVersionTemplate: --version prints cobra's "podmin version …"
	// line. A template would make text/template's executor reachable, whose
	// by-name method lookups keep every exported method of every linked
	// type (all operations of the AWS SDK clients) in the binary.
	// The flag package quotes the values it refuses: they pass the
	// scrubber's quoting like every other piece of input an error shows.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{errors.New(scrub.QuoteSpans(err.Error()))} })
	root.AddCommand(
		newConnectCmd(env),
		newUseCmd(env),
		newDisconnectCmd(env),
		newInitCmd(env),
		newValidateCmd(env),
		newDeployCmd(env),
		newListCmd(env),
		newStatusCmd(env),
		newDeleteCmd(env),
		newIndexCmd(env),
		newPreviewCmd(env),
		newBuildCmd(env),
		newPullCmd(env),
		newPushCmd(env),
		newSecretCmd(env),
		newRecipesCmd(env),
		newFetchCmd(env),
		newVersionCmd(),
	)
	root.AddCommand(newHistoryCmd(env), newRollbackCmd(env))
	root.AddCommand(clusterCommands(env)...)
	root.AddCommand(newInstallCmds(env)...)
	root.AddCommand(starlarkCommands(env)...)
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictCompletion(root)
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			markNoContext(c)
		}
	}
	addCompletions(root, env)
	exampleGeneratedCommands(root)
	checkFlagValues(root, flagChecks(env))
	argsAreUsage(root)
	return root
}

// markNoContext marks a command and its children as not needing a context.
func markNoContext(c *cobra.Command) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[noContext] = "true"
}

func execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	h := &deadlineHolder{}
	cmd, err := root.ExecuteContextC(context.WithValue(ctx, deadlineKey{}, h))
	if h.cancel != nil {
		h.cancel()
	}
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	var sig signalError
	if errors.As(context.Cause(ctx), &sig) {
		err = fmt.Errorf("%w: %s", err, sig)
	} else if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, builtins.ErrTimeout) {
		// Cut off outside a bucket request (a backoff wait, a local step).
		err = fmt.Errorf("%w: the command did not finish within --timeout: raise --timeout if it needs longer", err)
	}
	return report(stderr, cmd, err)
}

func newVersionCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and build metadata",
		Example: `  podmin version
  podmin version -o json`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Current()
			return printResult(cmd.OutOrStdout(), out, info, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, "podmin", info.String())
				return err
			})
		},
	}
	addOutputFlag(cmd, &out)
	return cmd
}
