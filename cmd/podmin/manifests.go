// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/manifest"
)

// addManifestFlags adds the flags of the built-in minimal DaemonSet that
// init and deploy share. Names equal the Starlark keyword arguments.
func addManifestFlags(f *pflag.FlagSet, o *builtins.ManifestOptions) {
	f.StringVarP(&o.NodeGroup, "nodegroup", "g", "", "NodeGroup whose VMs run the Pod (required)")
	f.StringArrayVar(&o.Images, "image", nil, "image: one bare REFERENCE, or CONTAINER=REFERENCE per container (repeatable); shorthand like hello:v1 means registry.podmin.internal/apps/hello:v1")
	f.BoolVar(&o.Service, "service", false, "add a TCP Service on port 443 targeting 8443 with an HTTPS /healthz readiness probe")
	f.StringArrayVar(&o.Ports, "port", nil, "SERVICE:TARGET[,SERVICE:TARGET...] Service ports replacing the default (repeatable); the first target gets a TCP readiness probe")
	f.StringVar(&o.CPU, "cpu", "", "CPU limit for every container, a positive Kubernetes quantity (e.g. 500m)")
	f.StringVar(&o.Memory, "memory", "", "memory limit for every container, a positive Kubernetes quantity (e.g. 256Mi)")
	f.StringArrayVar(&o.Env, "env", nil, "KEY=VALUE, or KEY to copy the value from this shell's environment (repeatable)")
	f.StringArrayVar(&o.Secrets, "secret", nil, "secret KEY mounted from the context's default secrets provider (repeatable)")
}

func newInitCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.InitOptions
	var out string
	cmd := &cobra.Command{
		Use:   "init NAME --image IMAGE -g NODEGROUP",
		Short: "Write a minimal valid DaemonSet manifest",
		Long: `Init writes a minimal apps/v1 DaemonSet that Podmin accepts, to daemonset.yaml
or --file. Running it again is safe: a file that already holds exactly this
manifest is reported unchanged; a file holding anything else is left as it is
and reported as an error, unless --force replaces it.

One bare --image makes one container named NAME; repeated CONTAINER=REFERENCE
values make one container each. --service adds a matching TCP Service (443 → 8443)
with an HTTPS /healthz readiness probe; --port replaces those ports and gives the
first target a TCP readiness probe. Either probe runs every 2 s. --cpu and
--memory set limits on every container. --secret KEY lists KEY in the Pod's
podmin.dev/<secrets provider> annotation, using the context's default secrets
provider.`,
		Example: `  podmin init web --image hello:v1 -g workers --service
  podmin init app -g workers --namespace product \
    --image web=registry.podmin.internal/apps/example/web:v1 \
    --image sidecar=registry.podmin.internal/apps/example/sidecar:v1 --file app.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Name = args[0]
			res, err := env.Init(opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				verb := map[string]string{
					builtins.InitCreated:   "wrote",
					builtins.InitUnchanged: "unchanged, already holds this manifest:",
					builtins.InitReplaced:  "replaced",
				}[res.Action]
				_, err := fmt.Fprintf(w, "%s %s: DaemonSet %s in namespace %s for NodeGroup %s\nnext: podmin validate -f %s, then podmin deploy %s -g %s -f %s\n",
					verb, res.File, res.Name, res.Namespace, res.NodeGroup, res.File, res.Name, res.NodeGroup, res.File)
				return err
			})
		},
	}
	f := cmd.Flags()
	addManifestFlags(f, &opts.ManifestOptions)
	f.StringVar(&opts.Namespace, "namespace", "", "namespace of the DaemonSet and its Service (default \"default\")")
	f.StringVarP(&opts.File, "file", "f", "", "output file (default \""+builtins.DefaultManifestFile+"\")")
	f.BoolVar(&opts.Force, "force", false, "replace an existing file that holds a different manifest")
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "nodegroup")
	checkUsage(cmd, func(args []string) error {
		o := opts
		o.Name = args[0]
		return env.CheckInit(o)
	})
	return cmd
}

func newValidateCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.ValidateOptions
	var out string
	cmd := &cobra.Command{
		Use:   "validate -f FILE [--image IMAGE]... [--service]",
		Short: "Check a manifest exactly as deploy would, without writing anything",
		Long: `Validate runs deploy's extraction and validation on FILE: exactly one apps/v1
DaemonSet and optionally one v1 Service, the NodeGroup selector, image overrides,
image references and the supported Service subset. Nothing is written.

It refuses what only a Kubernetes API server could serve, which kubelet on a
Podmin node cannot: ConfigMap, Secret, PersistentVolumeClaim, ephemeral and CSI
volumes, projected ConfigMaps, Secrets, service account tokens and trust
bundles, envFrom and valueFrom references to ConfigMaps and Secrets, fieldRefs
kubelet cannot resolve for a static Pod, and service accounts; and a hostPath of
"/" or into Podmin's own node directories (/run/podmin, /var/run/podmin,
/etc/podmin, /var/lib/podmin), which hold other Pods' identities and secrets and
the static Pod files. It warns, on standard error, about privileged settings
and host access: hostNetwork, hostPID, hostIPC, privileged containers, added
capabilities, other hostPath volumes and hostPort.

On success it prints a summary, or with -o yaml|json the extracted Pod (and
Service) exactly as deploy would store them, with -o json also the warnings.
Every error names the field and what to do.`,
		Example: `  podmin validate -f daemonset.yaml
  podmin validate -f daemonset.yaml --image web=hello:v2 -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			res, err := env.Validate(opts)
			if err != nil {
				return err
			}
			return printExtracted(cmd.OutOrStdout(), out, res)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.File, "file", "f", "", "manifest to validate, or - for standard input (required)")
	f.StringArrayVar(&opts.Images, "image", nil, "image override: one bare REFERENCE or CONTAINER=REFERENCE (repeatable)")
	f.BoolVar(&opts.Service, "service", false, "require the manifest to contain a Service")
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "file")
	checkUsage(cmd, func([]string) error { return manifest.CheckImageValues(opts.Images) })
	return cmd
}

// printExtracted prints a validated deployment: a summary, the payload
// stream (yaml) or both payloads as one JSON object.
func printExtracted(w io.Writer, format string, res *builtins.Extracted) error {
	if strings.HasPrefix(format, jsonpathPrefix) {
		// What a JSONPath selects from the -o json document.
		var doc bytes.Buffer
		if err := printExtracted(&doc, "json", res); err != nil {
			return err
		}
		return printJSONPath(w, strings.TrimPrefix(format, jsonpathPrefix), doc.Bytes())
	}
	switch format {
	case "yaml":
		if _, err := w.Write(res.PodYAML); err != nil {
			return err
		}
		if res.ServiceYAML != nil {
			if _, err := fmt.Fprintf(w, "---\n%s", res.ServiceYAML); err != nil {
				return err
			}
		}
		return nil
	case "json":
		pod, err := yaml.YAMLToJSON(res.PodYAML)
		if err != nil {
			return err
		}
		doc := map[string]json.RawMessage{"pod": pod, "service": json.RawMessage("null")}
		if res.ServiceYAML != nil {
			svc, err := yaml.YAMLToJSON(res.ServiceYAML)
			if err != nil {
				return err
			}
			doc["service"] = svc
		}
		if doc["warnings"], err = marshalFull(builtins.ManifestWarnings(res)); err != nil {
			return err
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var containers []string
	for _, c := range res.Pod.Spec.InitContainers {
		containers = append(containers, c.Name+" (init): "+c.Image)
	}
	for _, c := range res.Pod.Spec.Containers {
		containers = append(containers, c.Name+": "+c.Image)
	}
	fmt.Fprintf(w, "valid: DaemonSet %s in namespace %s for NodeGroup %s\n", res.Name, res.Namespace, res.NodeGroup)
	fmt.Fprintf(w, "containers:\n  %s\n", strings.Join(containers, "\n  "))
	if s := res.Service; s != nil {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s→%d", p.Port, p.Protocol, p.TargetPort))
		}
		fmt.Fprintf(w, "service: %s.%s ports %s\n", s.Name, s.Namespace, strings.Join(ports, ", "))
	}
	return nil
}
