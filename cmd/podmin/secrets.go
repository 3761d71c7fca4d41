// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/secrets"
)

// maxSecretInput bounds what --stdin and --file read; every provider's
// limit is far below it, so the builtin still reports the exact size.
const maxSecretInput = 1 << 20

func newSecretCmd(env *builtins.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage the secrets mounted into Pods (values are never printed)",
		Long: `Secret manages the values that Pods mount from their podmin.dev/<provider>
annotations. A secret is named /<cluster>/<namespace>/<pod>/<key>: --for names the
Pod (the DaemonSet), --namespace/-n its namespace (default "default"), and KEY is
1-255 letters, digits, '.', '_' or '-'.

--provider selects aws-parameter-store (SecureString, UTF-8, up to 4 KiB; no
delete/restore), aws-secrets-manager (string or binary, up to 64 KiB; delete
keeps a 30-day recovery window) or local (files under the Podmin data directory,
Parameter Store's rules). It defaults to the context's secrets provider.

Values are read without echo from the terminal, or with --stdin or --file. They
are never printed or logged. --system addresses the one operator-managed system
key, /<cluster>/_system/otel-logs-headers.`,
		Example: `  podmin secret create db-password --for web
  podmin secret list --for web`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newSecretWriteCmd(env, "create", "Create a secret (fails when it exists)", env.CreateSecret),
		newSecretWriteCmd(env, "update", "Replace an existing secret's value", env.UpdateSecret),
		newSecretListCmd(env),
		newSecretSimpleCmd(env, "delete", "Schedule a recoverable deletion (aws-secrets-manager only)", true, env.DeleteSecret),
		newSecretSimpleCmd(env, "restore", "Cancel a scheduled deletion (aws-secrets-manager only)", false, env.RestoreSecret),
		newSecretDestroyCmd(env),
	)
	return cmd
}

// addSecretFlags adds the flags that address one secret.
func addSecretFlags(f *pflag.FlagSet, opts *builtins.SecretOptions) {
	f.StringVar(&opts.For, "for", "", "the Pod (DaemonSet name) the secret belongs to")
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "the Pod's namespace (default \"default\")")
	f.StringVar(&opts.Provider, "provider", "", "secrets provider: aws-parameter-store, aws-secrets-manager or local (default: the context's)")
	f.BoolVar(&opts.System, "system", false, "address /<cluster>/_system/KEY (only otel-logs-headers); no --for or --namespace")
}

func newSecretWriteCmd(env *builtins.Env, verb, short string, op func(context.Context, builtins.SecretValueOptions) (builtins.SecretResult, error)) *cobra.Command {
	var opts builtins.SecretValueOptions
	var stdin bool
	var file, out string
	cmd := &cobra.Command{
		Use:   verb + " KEY (--for POD [-n NAMESPACE] | --system) [--provider P] [--stdin | --file PATH]",
		Short: short,
		Example: fmt.Sprintf(`  podmin secret %[1]s db-password --for web
  printf %%s "$TOKEN" | podmin secret %[1]s api-token --for web -n product --stdin
  podmin secret %[1]s tls.key --for web --provider aws-secrets-manager --file key.der
  podmin secret %[1]s otel-logs-headers --system --file headers.json`, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Key = args[0]
			if err := env.CheckSecret(opts.SecretOptions); err != nil {
				return err
			}
			v, err := readSecretValue(cmd, env, opts.Key, stdin, file)
			env.Scrub.Add(opts.Key, v) // from the moment it is read
			if err != nil {
				return err
			}
			opts.Value = v
			res, err := op(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printSecretResult(cmd, out, res)
		},
	}
	f := cmd.Flags()
	addSecretFlags(f, &opts.SecretOptions)
	f.BoolVar(&stdin, "stdin", false, "read the value from standard input, byte for byte")
	f.StringVar(&file, "file", "", "read the value from this file, byte for byte")
	addOutputFlag(cmd, &out)
	checkUsage(cmd, func(args []string) error {
		o := opts.SecretOptions
		o.Key = args[0]
		if err := builtins.CheckSecretAddress(o); err != nil {
			return err
		}
		if err := conflicting(cmd, "stdin", "file", "each gives the value; pass one of them"); err != nil {
			return err
		}
		// Without a source the value is typed on the terminal: a standard
		// input that is not one cannot give it.
		if !stdin && file == "" && env.Stdin != nil && terminal(env) == nil {
			return errNoValueSource
		}
		return nil
	})
	return cmd
}

func newSecretSimpleCmd(env *builtins.Env, verb, short string, isDestructive bool, op func(context.Context, builtins.SecretOptions) (builtins.SecretResult, error)) *cobra.Command {
	var opts builtins.SecretOptions
	var out string
	var yes bool
	cmd := &cobra.Command{
		Use:   verb + " KEY (--for POD [-n NAMESPACE] | --system) [--provider P]",
		Short: short,
		Long: short + `. Delete asks for confirmation on a terminal; --yes/-y
confirms without asking, and is needed when standard input is not a terminal.

Only aws-secrets-manager has recoverable deletion: delete schedules the deletion
after a 30-day recovery window and restore cancels it. aws-parameter-store and
local have no delete/restore; use destroy to delete permanently.`,
		Example: fmt.Sprintf(`  podmin secret %[1]s api-token --for web --provider aws-secrets-manager
  podmin secret %[1]s api-token --for web -n product --provider aws-secrets-manager`, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Key = args[0]
			if isDestructive {
				c, err := env.CurrentContext()
				if err != nil {
					return err
				}
				if err := env.CheckSecret(opts); err != nil {
					return err
				}
				if err := confirm(cmd, env, yes, "deleting secret "+opts.Key+" schedules its deletion", c.Cluster); err != nil {
					return err
				}
			}
			res, err := op(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printSecretResult(cmd, out, res)
		},
	}
	addSecretFlags(cmd.Flags(), &opts)
	if isDestructive {
		destructive(cmd, &yes)
	}
	addOutputFlag(cmd, &out)
	checkUsage(cmd, func(args []string) error {
		o := opts
		o.Key = args[0]
		return builtins.CheckSecretAddress(o)
	})
	return cmd
}

func newSecretDestroyCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.DestroySecretOptions
	var yes bool
	var out string
	cmd := &cobra.Command{
		Use:   "destroy KEY (--for POD [-n NAMESPACE] | --system) [--provider P] [-y]",
		Short: "Delete a secret permanently, after confirmation",
		Long: `Destroy deletes a secret permanently, without a recovery window, on every
provider. On a terminal it asks you to type the cluster ID; --yes/-y confirms
without asking. Without a terminal it never waits for input: pass --yes.`,
		Example: `  podmin secret destroy db-password --for web
  podmin secret destroy api-token --for web -n product --provider aws-secrets-manager -y`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Key = args[0]
			c, err := env.CurrentContext()
			if err != nil {
				return err
			}
			if err := env.CheckSecret(opts.SecretOptions); err != nil {
				return err
			}
			what := "secret " + opts.Key
			if opts.For != "" {
				what += " of Pod " + opts.For
			}
			if err := confirm(cmd, env, yes, "destroying "+what+" is permanent", c.Cluster); err != nil {
				return err
			}
			opts.Confirm = c.Cluster
			res, err := env.DestroySecret(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printSecretResult(cmd, out, res)
		},
	}
	addSecretFlags(cmd.Flags(), &opts.SecretOptions)
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	checkUsage(cmd, func(args []string) error {
		o := opts.SecretOptions
		o.Key = args[0]
		return builtins.CheckSecretAddress(o)
	})
	return cmd
}

func newSecretListCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.ListSecretsOptions
	var out string
	cmd := &cobra.Command{
		Use:   "list [--for POD] [-n NAMESPACE] [--system] [--provider P] [-o table|json|yaml]",
		Short: "List secret names and metadata (never values)",
		Long: `List shows the secrets of the current cluster in one provider: name, provider,
last modification when the provider reports it, and a pending deletion. Values
are never shown. --for limits it to one Pod, --namespace alone to one namespace,
--system to the system keys. Podmin's internal system keys are never listed.`,
		Example: `  podmin secret list
  podmin secret list --for web -n product -o json
  podmin secret list --system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			res, err := env.ListSecrets(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				if len(res.Secrets) == 0 {
					_, err := fmt.Fprintf(w, "no secrets in %s for cluster %s\n", res.Provider, res.Cluster)
					return err
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tPROVIDER\tLAST MODIFIED\tSTATUS")
				for _, e := range res.Secrets {
					status := "active"
					if !e.DeletionScheduled.IsZero() {
						status = "scheduled for deletion " + e.DeletionScheduled.Format(time.RFC3339)
					}
					modified := "-"
					if !e.LastModified.IsZero() {
						modified = e.LastModified.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Provider, modified, status)
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.For, "for", "", "list only this Pod's secrets")
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "list only this namespace (with --for: default \"default\")")
	f.StringVar(&opts.Provider, "provider", "", "secrets provider (default: the context's)")
	f.BoolVar(&opts.System, "system", false, "list only the system keys")
	addOutputFlag(cmd, &out)
	checkUsage(cmd, func([]string) error { return builtins.CheckListSecrets(opts) })
	return cmd
}

func printSecretResult(cmd *cobra.Command, out string, res builtins.SecretResult) error {
	return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
		var err error
		switch res.Action {
		case "scheduled-for-deletion":
			_, err = fmt.Fprintf(w, "%s in %s is scheduled for deletion: \"podmin secret restore\" cancels it within %d days; \"podmin secret destroy\" deletes it now\n",
				res.Name, res.Provider, res.RecoveryWindowDays)
		default:
			_, err = fmt.Fprintf(w, "%s %s in %s\n", res.Action, res.Name, res.Provider)
		}
		return err
	})
}

// terminal returns standard input when it is a terminal, else nil.
func terminal(env *builtins.Env) *os.File {
	f, ok := env.Stdin.(*os.File)
	if ok && term.IsTerminal(int(f.Fd())) {
		return f
	}
	return nil
}

// errNoValueSource is the usage error of a secret write that names no
// source of the value when there is no terminal to prompt on.
var errNoValueSource = errors.New("no value given and standard input is not a terminal to prompt on: pass --stdin to read the value from standard input, or --file PATH")

// readSecretValue reads the value from the file, standard input or, by
// default, a no-echo prompt on the terminal. It never blocks on a
// non-terminal standard input it was not told to read.
func readSecretValue(cmd *cobra.Command, env *builtins.Env, key string, stdin bool, file string) (secrets.Value, error) {
	switch {
	case stdin && file != "":
		return nil, usageError{errors.New("--stdin and --file both give the value: pass one of them")}
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("read the value: %w: check --file", err)
		}
		defer f.Close()
		return readLimited(f, "--file "+file)
	case stdin:
		if env.Stdin == nil {
			return nil, errors.New("standard input is not available: pass --file PATH")
		}
		return readLimited(env.Stdin, "standard input")
	}
	tty := terminal(env)
	if tty == nil {
		return nil, usageError{errNoValueSource}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Value for %s (input is hidden): ", key)
	v, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return nil, fmt.Errorf("read the value from the terminal: %w: pass --stdin or --file instead", err)
	}
	return v, nil
}

func readLimited(r io.Reader, what string) (secrets.Value, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSecretInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the value from %s: %w", what, err)
	}
	if len(b) > maxSecretInput {
		return nil, fmt.Errorf("the value in %s is larger than %d bytes: secrets are at most 64 KiB", what, maxSecretInput)
	}
	return b, nil
}

// readLine reads one line from the terminal byte by byte, so nothing after
// it is consumed.
func readLine(f *os.File) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := f.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				return strings.TrimSuffix(b.String(), "\r"), nil
			}
			b.WriteByte(buf[0])
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b.String(), nil
			}
			return "", err
		}
	}
}
