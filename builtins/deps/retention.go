// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"

	"podmin.dev/podmin/internal/objstore"
)

// RetainVersions is how many newest versions of each dependency and
// architecture retention always keeps.
const RetainVersions = 2

// RetainAge is how old every object of an older version must be before
// retention deletes it, so a rollback stays possible.
const RetainAge = 28 * 24 * time.Hour

// ObjectName is a dependency object path split into its parts.
type ObjectName struct {
	Key, Version string
	Arch         Arch
}

// ParseObjectPath splits "dependencies/<key>/<key>-v<version>[-...]-linux-<arch>[.ext]";
// ok is false for anything else (the manifest, foreign objects).
func ParseObjectPath(p string) (ObjectName, bool) {
	rest, ok := strings.CutPrefix(p, "dependencies/")
	if !ok {
		return ObjectName{}, false
	}
	key, file, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(file, "/") {
		return ObjectName{}, false
	}
	v, ok := strings.CutPrefix(file, key+"-v")
	if !ok {
		return ObjectName{}, false
	}
	i := strings.LastIndex(v, "-linux-")
	if i <= 0 {
		return ObjectName{}, false
	}
	arch, _, _ := strings.Cut(v[i+len("-linux-"):], ".")
	if Arch(arch) != AMD64 && Arch(arch) != ARM64 {
		return ObjectName{}, false
	}
	return ObjectName{Key: key, Version: v[:i], Arch: Arch(arch)}, true
}

// versionOrder returns how the versions of dependency key compare: by
// semantic versioning when every one of them is a semantic version of a
// release-tagged dependency, else (Debian packages, build names) by
// Debian's rules, which order numbers as numbers. One rule for a whole
// group keeps the order total.
func versionOrder(key string, versions []string) func(a, b string) int {
	if d, ok := Lookup(key); ok && d.Source.Kind == DebianPackages {
		return CompareDebian
	}
	for _, v := range versions {
		if !semver.IsValid("v" + v) {
			return CompareDebian
		}
	}
	return func(a, b string) int {
		return cmp.Or(semver.Compare("v"+a, "v"+b), CompareDebian(a, b))
	}
}

// RetentionPlan returns the objects retention deletes from a listing of
// dependencies/: for every dependency and architecture ever uploaded, the
// newest RetainVersions versions stay, and so does every version the
// manifest records; an older version goes only when every one of its
// objects is at least RetainAge old.
func RetentionPlan(objects []objstore.Info, m *Manifest, now time.Time) []objstore.Info {
	type group struct {
		key  string
		arch Arch
	}
	versions := map[group]map[string][]objstore.Info{}
	for _, o := range objects {
		n, ok := ParseObjectPath(o.Key)
		if !ok {
			continue
		}
		g := group{n.Key, n.Arch}
		if versions[g] == nil {
			versions[g] = map[string][]objstore.Info{}
		}
		versions[g][n.Version] = append(versions[g][n.Version], o)
	}
	var del []objstore.Info
	for _, g := range slices.SortedFunc(maps.Keys(versions), func(a, b group) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.arch, b.arch))
	}) {
		order := versionOrder(g.key, slices.Collect(maps.Keys(versions[g])))
		vs := slices.SortedFunc(maps.Keys(versions[g]), func(a, b string) int { return order(b, a) })
		for i, v := range vs {
			if i < RetainVersions || (m != nil && recorded(m, g.key, v)) {
				continue
			}
			objs := versions[g][v]
			old := true
			for _, o := range objs {
				if now.Sub(o.LastModified) < RetainAge {
					old = false
				}
			}
			if old {
				del = append(del, objs...)
			}
		}
	}
	return del
}

// recorded reports whether m records version v of key for any
// architecture.
func recorded(m *Manifest, key, v string) bool {
	for _, f := range m.Dependencies[key] {
		if n, ok := ParseObjectPath(f.Path); ok && n.Version == v {
			return true
		}
	}
	return false
}

// Retain lists dependencies/ once and deletes what RetentionPlan selects.
// Failures are reported to warn and never returned: cleanup must not fail
// setup. It returns the deleted keys.
func Retain(ctx context.Context, store objstore.Store, m *Manifest, now time.Time, warn func(string)) []string {
	if warn == nil {
		warn = func(string) {}
	}
	objects, err := objstore.ListAll(ctx, store, "dependencies/")
	if err != nil {
		warn(fmt.Sprintf("dependency retention skipped: list dependencies/: %v", err))
		return nil
	}
	var deleted []string
	for _, o := range RetentionPlan(objects, m, now) {
		// The ETag guards against deleting an object re-uploaded since
		// the listing.
		if err := store.Delete(ctx, o.Key, o.ETag); err != nil {
			warn(fmt.Sprintf("dependency retention: delete %s: %v", o.Key, err))
			continue
		}
		deleted = append(deleted, o.Key)
	}
	return deleted
}
