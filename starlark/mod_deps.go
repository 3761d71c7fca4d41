// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"net/http"
	"path/filepath"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/deps"
)

func depsFamily() []*Builtin {
	return []*Builtin{{
		Name: "deps.fetch", Command: "fetch", Returns: "fetch",
		Params: []Param{
			{Name: "arch", Type: "list[str]", Default: "[]", Doc: "architectures to fetch, amd64 or arm64 (default both)"},
			{Name: "otel_logs", Type: "bool", Default: "False", Doc: "also fetch the log-export packages (Fluent Bit and libpq5)"},
			{Name: "agent_source", Type: "str", Doc: "cross-compile podmin-agent from this Podmin checkout instead of fetching the published agent"},
		},
		Doc: `Downloads and verifies the node dependencies into the local cache.

Same as "podmin fetch": the resolution setup uses, digests verified, valid
cached files kept. Never touches the cluster bucket. Returns fetch(dir,
files); each file is dependency(key, arch, version, digest, object, cache,
size). Under --dry-run the set is resolved but nothing is downloaded.`,
		impl: func(c *call) (star.Value, error) {
			var archs strList
			var otel star.Bool
			var o deps.FetchOptions
			if err := c.unpack(&archs, &otel, &o.AgentSource); err != nil {
				return nil, err
			}
			o.Arch, o.OTelLogs = archs, bool(otel)
			o.CacheDir = c.host.opts.CacheDir
			if env, ok := c.host.opts.Ops.(*builtins.Env); ok {
				if o.CacheDir == "" {
					o.CacheDir = env.Dirs.Cache
				}
				if env.Transport != nil {
					o.Client = &http.Client{Transport: env.Transport}
				}
			}
			if o.AgentSource != "" && c.host.opts.WorkDir != "" && !filepath.IsAbs(o.AgentSource) {
				o.AgentSource = filepath.Join(c.host.opts.WorkDir, o.AgentSource)
			}
			o.ResolveOnly = c.host.opts.DryRun
			res, err := deps.Fetch(c.ctx, o)
			if err != nil {
				return nil, c.fail(err)
			}
			files := make([]star.Value, len(res.Files))
			for i, f := range res.Files {
				files[i] = result("dependency", str("key", f.Key), str("arch", f.Arch), str("version", f.Version),
					str("digest", f.Digest), str("object", f.Object), str("cache", f.Cache), value("size", star.MakeInt64(f.Size)))
			}
			return result("fetch", str("dir", res.Dir), value("files", frozenList(files))), nil
		},
	}}
}
