// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// manifestOps are the manifest operations the manifests module calls.
type manifestOps interface {
	Init(opts builtins.InitOptions) (builtins.InitResult, error)
	Validate(opts builtins.ValidateOptions) (*builtins.Extracted, error)
}

// manifestParams are the parameters of the built-in minimal DaemonSet that
// init and deploy share, in the order the CLI's addManifestFlags has them.
func manifestParams(fileDoc string) []Param {
	return []Param{
		{Name: "name", Type: "str", Positional: true, Required: true, Doc: "the DaemonSet's name"},
		{Name: "nodegroup", Type: "str", Required: true, Doc: "NodeGroup whose VMs run the Pod"},
		{Name: "image", Type: "str | list[str] | dict[str, str]", Default: "[]", Doc: "one bare reference, CONTAINER=REFERENCE entries, or {container: reference}"},
		{Name: "service", Type: "bool", Default: "False", Doc: "add a TCP Service 443 → 8443 with an HTTPS /healthz readiness probe every 2 s"},
		{Name: "port", Type: "list[str]", Default: "[]", Doc: "SERVICE:TARGET Service ports replacing the default; the first target gets a TCP readiness probe every 2 s"},
		{Name: "cpu", Type: "str", Doc: "CPU limit for every container"},
		{Name: "memory", Type: "str", Doc: "memory limit for every container"},
		{Name: "env", Type: "list[str] | dict[str, str]", Default: "[]", Doc: "KEY=VALUE entries, or KEY to copy from Podmin's environment"},
		{Name: "secret", Type: "list[str]", Default: "[]", Doc: "secret keys mounted from the context's default secrets provider"},
		{Name: "namespace", Type: "str", Doc: "namespace (default \"default\")"},
		{Name: "file", Type: "str", Doc: fileDoc},
	}
}

// unpackManifest unpacks manifestParams, then the extra parameters a
// builtin appends to them.
func (c *call) unpackManifest(o *builtins.ManifestOptions, file *string, extra ...any) error {
	var service star.Bool
	var images, env kvList
	var ports, secrets strList
	targets := append([]any{&o.Name, &o.NodeGroup, &images, &service, &ports, &o.CPU, &o.Memory, &env, &secrets, &o.Namespace, file}, extra...)
	if err := c.unpack(targets...); err != nil {
		return err
	}
	o.Images, o.Service, o.Ports, o.Env, o.Secrets = images, bool(service), ports, env, secrets
	return nil
}

func manifestsFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "manifests.init", Command: "init", Returns: "manifest", Mutates: true,
			Params: append(manifestParams(`output file (default "daemonset.yaml")`),
				Param{Name: "force", Type: "bool", Default: "False", Doc: "replace an existing file that holds a different manifest"}),
			Doc: `Writes a minimal valid DaemonSet (and Service) to a file.

Same as "podmin init". Safe to repeat: a file that already holds exactly
this manifest is reused (action "unchanged"); a file holding anything else
fails the call and stays as it is, unless force=True replaces it. Returns
manifest(file, name, namespace, nodegroup, service, action, warnings, planned),
where action is "created", "unchanged" or "replaced" and warnings lists the
manifest's privileged settings and host access (also shown on standard error).`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.InitOptions
				var force star.Bool
				if err := c.unpackManifest(&o.ManifestOptions, &o.File, &force); err != nil {
					return nil, err
				}
				o.Force = bool(force)
				res, err := c.host.ops.Init(o)
				if err != nil {
					return nil, c.fail(err)
				}
				return result("manifest", str("file", res.File), str("name", res.Name), str("namespace", res.Namespace),
					str("nodegroup", res.NodeGroup), boolean("service", res.Service), str("action", res.Action),
					value("warnings", warningList(res.Warnings)), boolean("planned", c.host.planned())), nil
			},
		},
		{
			Name: "manifests.validate", Command: "validate", Returns: "validated",
			Params: []Param{
				{Name: "file", Type: "str", Required: true, Doc: "the manifest to check"},
				{Name: "image", Type: "str | list[str] | dict[str, str]", Default: "[]", Doc: "image overrides"},
				{Name: "service", Type: "bool", Default: "False", Doc: "require a Service"},
			},
			Doc: `Checks a manifest exactly as deploy would, without writing anything.

Same as "podmin validate". Returns validated(name, namespace, nodegroup,
containers, service, pod_yaml, service_yaml, warnings): containers is a list of
container(name, image, init); service is None or service(name, namespace, ports)
with ports like "443/TCP→8443"; warnings lists the manifest's privileged
settings and host access (also shown on standard error).`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.ValidateOptions
				var images kvList
				var service star.Bool
				if err := c.unpack(&o.File, &images, &service); err != nil {
					return nil, err
				}
				o.Images, o.Service = images, bool(service)
				res, err := c.host.ops.Validate(o)
				if err != nil {
					return nil, c.fail(err)
				}
				return extractedValue(res), nil
			},
		},
	}
}

func extractedValue(res *builtins.Extracted) star.Value {
	var containers []star.Value
	for _, ct := range res.Pod.Spec.InitContainers {
		containers = append(containers, result("container", str("name", ct.Name), str("image", ct.Image), boolean("init", true)))
	}
	for _, ct := range res.Pod.Spec.Containers {
		containers = append(containers, result("container", str("name", ct.Name), str("image", ct.Image), boolean("init", false)))
	}
	var svc star.Value = star.None
	if s := res.Service; s != nil {
		ports := make([]string, len(s.Ports))
		for i, p := range s.Ports {
			ports[i] = fmt.Sprintf("%d/%s→%d", p.Port, p.Protocol, p.TargetPort)
		}
		svc = result("service", str("name", s.Name), str("namespace", s.Namespace), value("ports", stringList(ports)))
	}
	return result("validated", str("name", res.Name), str("namespace", res.Namespace), str("nodegroup", res.NodeGroup),
		value("containers", frozenList(containers)), value("service", svc),
		str("pod_yaml", string(res.PodYAML)), str("service_yaml", string(res.ServiceYAML)),
		value("warnings", warningList(builtins.ManifestWarnings(res))))
}
