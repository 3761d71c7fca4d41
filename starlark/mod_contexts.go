// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
)

// contextOps are the context operations the contexts module calls.
type contextOps interface {
	Connect(ctx context.Context, opts builtins.ConnectOptions) (builtins.ConnectResult, error)
	Use(opts builtins.UseOptions) (contexts.Context, error)
	Disconnect(opts builtins.DisconnectOptions) (builtins.DisconnectResult, error)
	ListContexts() ([]builtins.ContextEntry, error)
	CurrentContext() (contexts.Context, error)
}

var clusterParam = Param{Name: "cluster", Type: "str", Positional: true, Required: true, Doc: "the cluster ID"}

func contextFields(c contexts.Context) []field {
	return []field{str("cluster", c.Cluster), str("provider", c.Provider), str("region", c.Region),
		str("bucket", c.Bucket), str("profile", c.Profile), str("secrets_provider", c.SecretsProvider)}
}

func contextValue(c contexts.Context, extra ...field) star.Value {
	return result("context", append(contextFields(c), extra...)...)
}

func contextsFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "contexts.connect", Command: "connect", Returns: "connection", Mutates: true,
			Params: []Param{clusterParam,
				{Name: "provider", Type: "str", Required: true, Doc: "aws or local"},
				{Name: "bucket", Type: "str", Required: true, Doc: "the cluster's bucket (created when absent)"},
				{Name: "region", Type: "str", Doc: "region (default: the provider's configured region)"},
				{Name: "profile", Type: "str", Doc: "AWS shared-config profile"},
				{Name: "secrets_provider", Type: "str", Doc: "default secrets provider"},
				{Name: "replace", Type: "bool", Default: "False", Doc: "connect a saved context to another bucket or provider, replacing its current one"},
			},
			Doc: `Connects to a cluster's bucket (creating it when absent) and selects it.

Same as "podmin connect". Connecting a saved context to another bucket or
provider fails unless replace = True; then the replaced context is in previous
and a note on standard error says what was replaced. Returns
connection(cluster, provider, region, bucket, profile, secrets_provider,
bucket_created, bucket_owned, replaced, previous, planned); previous is None,
or context(...) of the replaced context.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.ConnectOptions
				var replace star.Bool
				if err := c.unpack(&o.Cluster, &o.Provider, &o.Bucket, &o.Region, &o.Profile, &o.SecretsProvider, &replace); err != nil {
					return nil, err
				}
				o.Replace = bool(replace)
				res, err := c.host.ops.Connect(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				var previous star.Value = star.None
				if p := res.Previous; p != nil {
					previous = contextValue(*p)
					fmt.Fprintf(c.host.stderr, "replaced context %s: it connected bucket %s (provider %s); it now connects bucket %s (provider %s)\n",
						p.Cluster, p.Bucket, p.Provider, res.Context.Bucket, res.Context.Provider)
				}
				return result("connection", append(contextFields(res.Context),
					boolean("bucket_created", res.BucketCreated), boolean("bucket_owned", res.BucketOwned),
					boolean("replaced", res.Replaced), value("previous", previous), boolean("planned", c.host.planned()))...), nil
			},
		},
		{
			Name: "contexts.use", Command: "use", Returns: "context", Mutates: true,
			Params: []Param{clusterParam,
				{Name: "persist", Type: "bool", Default: "False", Doc: "also make it the machine-wide current context, as \"podmin use CLUSTER\" does"},
			},
			Doc: `Selects a saved context for the operations that follow, for this run only.

The machine-wide current context, and every other shell, keep theirs: a run
started with "podmin run --context NAME" (or PODMIN_CONTEXT=NAME) begins on
NAME, and use() switches it for the rest of the run. With persist = True it
also becomes the current context, as "podmin use CLUSTER" makes it. Returns
context(cluster, provider, region, bucket, profile, secrets_provider).

    podmin.contexts.use("staging")                 # this run only
    podmin.contexts.use("prod", persist = True)    # and every later command`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.UseOptions
				var persist star.Bool
				if err := c.unpack(&o.Cluster, &persist); err != nil {
					return nil, err
				}
				o.Persist = bool(persist)
				ctx, err := c.host.ops.Use(o)
				if err != nil {
					return nil, c.fail(err)
				}
				return contextValue(ctx), nil
			},
		},
		{
			Name: "contexts.disconnect", Command: "disconnect", Returns: "disconnection", Mutates: true, Destructive: true,
			confirmTarget: func(c *call) string { return c.subject("cluster") },
			Params:        []Param{clusterParam},
			Doc: `Forgets a saved context on this machine; the bucket stays untouched. Destructive: needs confirm or --yes.

Same as "podmin disconnect CLUSTER". Returns disconnection(cluster, bucket,
was_current, planned).`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.DisconnectOptions
				if err := c.unpack(&o.Cluster); err != nil {
					return nil, err
				}
				res, err := c.host.ops.Disconnect(o)
				if err != nil {
					return nil, c.fail(err)
				}
				return result("disconnection", str("cluster", res.Context.Cluster), str("bucket", res.Context.Bucket),
					boolean("was_current", res.WasCurrent), boolean("planned", c.host.planned())), nil
			},
		},
		{
			Name: "contexts.list", Command: "use", Returns: "list[context]",
			Doc: `Lists the saved contexts in name order.

Same as "podmin use" without an argument. Each item is context(cluster, provider,
region, bucket, profile, secrets_provider, current, in_effect, selected_by):
current marks the machine-wide current context, in_effect the one this run
uses, and selected_by says what selected it ("--context", "PODMIN_CONTEXT",
"current" or "the recipe"; "" on the other items).`,
			impl: func(c *call) (star.Value, error) {
				if err := c.unpack(); err != nil {
					return nil, err
				}
				list, err := c.host.ops.ListContexts()
				if err != nil {
					return nil, c.fail(err)
				}
				vs := make([]star.Value, len(list))
				for i, e := range list {
					vs[i] = contextValue(e.Context, boolean("current", e.Current), boolean("in_effect", e.InEffect), str("selected_by", e.SelectedBy))
				}
				return frozenList(vs), nil
			},
		},
		{
			Name: "contexts.current", Returns: "context",
			Params: []Param{{Name: "default", Type: "any", Default: "<unset>", Doc: "returned when no context is selected"}},
			Doc: `Returns the context in effect (this run's selection, else the current context), or default when none is selected.

Without default, no current context is an error that says how to connect.`,
			impl: func(c *call) (star.Value, error) {
				var def star.Value
				if err := c.unpack(&def); err != nil {
					return nil, err
				}
				ctx, err := c.host.ops.CurrentContext()
				if err != nil {
					if def != nil {
						return def, nil
					}
					return nil, c.fail(err)
				}
				return contextValue(ctx), nil
			},
		},
	}
}
