// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"path"
	"slices"
	"sort"
	"strings"
)

// objstorePkg is the object-store contract every bucket access goes through.
const objstorePkg = "podmin.dev/podmin/internal/objstore"

// bucketSite is one bucket operation the agent's reachable code calls.
type bucketSite struct {
	// fn is the function making the call (package.Func or
	// (package.Type).Method); op is the operation.
	fn, op string
	// arg is the key argument in body.
	arg  ast.Expr
	body funcBody
	at   string
}

// storeOps are objstore.Store's methods and objstore's helpers that take a
// key, with the argument index of the key.
var storeOps = map[string]int{
	"Get": 1, "Head": 1, "PutIfAbsent": 1, "PutIfMatch": 1, "Put": 1, "Delete": 1, "List": 1,
	objstorePkg + ".OpenObject": 2, objstorePkg + ".WriteObject": 2, objstorePkg + ".PutWithOptions": 2, objstorePkg + ".ListAll": 2,
}

// opActions are the IAM actions each operation needs. A streamed write
// may be a multipart upload, which it aborts when it cannot complete it.
var opActions = map[string][]string{
	"Get": {"s3:GetObject"}, "Head": {"s3:GetObject"}, "OpenObject": {"s3:GetObject"},
	"Put": {"s3:PutObject"}, "PutIfAbsent": {"s3:PutObject"}, "PutIfMatch": {"s3:PutObject"},
	"PutWithOptions": {"s3:PutObject", "s3:AbortMultipartUpload"}, "WriteObject": {"s3:PutObject", "s3:AbortMultipartUpload"},
	"Delete": {"s3:DeleteObject"}, "List": {"s3:ListBucket"}, "ListAll": {"s3:ListBucket"},
}

// bucketOp reports whether call is a bucket operation: a method of
// objstore.Store's name and signature (whatever interface or type holds
// it), or one of objstore's key helpers. The store's own packages are
// the implementation, not its users, and are left out.
func (a *reach) bucketOp(b funcBody, call *ast.CallExpr) (bucketSite, bool) {
	var id *ast.Ident
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	default:
		return bucketSite{}, false
	}
	fn, ok := b.info.Uses[id].(*types.Func)
	if !ok || b.fn == nil || strings.HasPrefix(b.fn.Pkg().Path(), objstorePkg) {
		return bucketSite{}, false
	}
	name := fn.Name()
	i, ok := storeOps[name]
	if fn.Pkg() != nil && fn.Pkg().Path() == objstorePkg && fn.Signature().Recv() == nil {
		i, ok = storeOps[objstorePkg+"."+name]
	} else if ok && !a.sameAsStoreMethod(fn) {
		ok = false
	}
	if !ok || i >= len(call.Args) {
		return bucketSite{}, false
	}
	pos := a.pkgs[0].Fset.Position(call.Pos())
	return bucketSite{fn: funcName(b.fn), op: name, arg: call.Args[i], body: b,
		at: fmt.Sprintf("%s:%d", path.Base(pos.Filename), pos.Line)}, true
}

// sameAsStoreMethod reports whether fn has the signature of
// objstore.Store's method of its name (receivers aside), whatever type or
// interface declares it.
func (a *reach) sameAsStoreMethod(fn *types.Func) bool {
	if fn.Signature().Recv() == nil {
		return false
	}
	for _, p := range a.pkgs {
		if p.PkgPath != objstorePkg {
			continue
		}
		store, _ := p.Types.Scope().Lookup("Store").Type().Underlying().(*types.Interface)
		for i := 0; store != nil && i < store.NumMethods(); i++ {
			if m := store.Method(i); m.Name() == fn.Name() {
				return types.Identical(m.Signature(), fn.Signature())
			}
		}
	}
	return false
}

func funcName(fn *types.Func) string {
	name := fn.Name()
	if recv := fn.Signature().Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			name = n.Obj().Name() + "." + name
		}
	}
	return strings.TrimPrefix(fn.Pkg().Path(), "podmin.dev/podmin/") + "." + name
}

// keyFuncs are the bucket layout's key functions (internal/state) as
// globs of what they return.
var keyFuncs = map[string]string{
	"internal/state.NodeGroupStatusPath":  "status/nodegroups/*.json",
	"internal/state.ViewPath":             "deployments/nodegroups/*.json",
	"internal/state.PodPath":              "nodegroups/*/pods/sha512/*.yaml",
	"internal/state.ServicePath":          "services/*/*/sha512/*.yaml",
	"internal/state.DependencyPath":       "dependencies/*/*",
	"internal/state.OCILayout.BlobPath":   "*/blobs/sha256/*",
	"internal/state.OCILayout.IndexFile":  "*/index.json",
	"internal/state.OCILayout.LayoutFile": "*/oci-layout",
}

// resolveKey resolves a key argument to the globs it can hold: a
// constant, a variable (a local, a parameter through every reached call,
// a field through every assignment) whose values all resolve, a layout key
// function, or a concatenation. ok is false when any value comes from
// elsewhere (data read from the bucket, a request).
func (a *reach) resolveKey(b funcBody, e ast.Expr, depth int) (keys []string, ok bool) {
	if depth > 6 {
		return nil, false
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return a.resolveKey(b, e.X, depth+1)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return nil, false
		}
		xs, ok := a.resolveKey(b, e.X, depth+1)
		if !ok {
			return nil, false
		}
		for i, x := range xs {
			xs[i] = strings.TrimSuffix(x, "*") + "*"
		}
		return xs, true
	case *ast.CallExpr:
		var id *ast.Ident
		switch f := e.Fun.(type) {
		case *ast.SelectorExpr:
			id = f.Sel
		case *ast.Ident:
			id = f
		}
		if fn, ok := b.info.Uses[id].(*types.Func); ok && fn.Pkg() != nil {
			if k, ok := keyFuncs[funcName(fn)]; ok {
				return []string{k}, true
			}
		}
		return nil, false
	}
	if tv, ok := b.info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		return []string{constant.StringVal(tv.Value)}, true
	}
	var id *ast.Ident
	switch e := e.(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	default:
		return nil, false
	}
	v, ok := b.info.Uses[id].(*types.Var)
	if !ok {
		return nil, false
	}
	return a.resolveVar(b, v, depth)
}

// resolveVar resolves every value assigned to v: in the function for a
// local, at every reached call for a parameter, anywhere in the loaded
// code for a field. A field never assigned holds only its zero value,
// which no key is.
func (a *reach) resolveVar(b funcBody, v *types.Var, depth int) ([]string, bool) {
	var keys []string
	ok := true
	add := func(ctx funcBody, rhs ast.Expr) {
		k, resolved := a.resolveKey(ctx, rhs, depth+1)
		ok = ok && resolved
		keys = append(keys, k...)
	}
	visit := func(ctx funcBody, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if !assignsTo(ctx.info, l, v) {
						continue
					}
					switch {
					case len(n.Rhs) == len(n.Lhs):
						add(ctx, n.Rhs[i])
					case len(n.Rhs) == 1 && i == 0:
						add(ctx, n.Rhs[0]) // key, err := f()
					default:
						ok = false
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if ctx.info.Defs[name] == v && i < len(n.Values) {
						add(ctx, n.Values[i])
					}
				}
			case *ast.CompositeLit:
				if !v.IsField() {
					break
				}
				st, isStruct := ctx.info.TypeOf(n).Underlying().(*types.Struct)
				if p, isPtr := ctx.info.TypeOf(n).Underlying().(*types.Pointer); isPtr {
					st, isStruct = p.Elem().Underlying().(*types.Struct)
				}
				for i, el := range n.Elts {
					if kv, isKV := el.(*ast.KeyValueExpr); isKV {
						if k, isID := kv.Key.(*ast.Ident); isID && ctx.info.Uses[k] == v {
							add(ctx, kv.Value)
						}
					} else if isStruct && i < st.NumFields() && st.Field(i) == v {
						add(ctx, el)
					}
				}
			}
			return true
		})
	}
	switch {
	case v.IsField():
		for _, p := range a.pkgs {
			for _, f := range p.Syntax {
				visit(funcBody{f, p.TypesInfo, nil}, f)
			}
		}
		if len(keys) == 0 && a.decodedField(v) {
			return nil, false // filled by decoding data, never by an assignment
		}
	case b.fn != nil && paramIndex(b.fn, v) >= 0:
		i := paramIndex(b.fn, v)
		callers := a.callers[b.fn]
		if len(callers) == 0 {
			return nil, false
		}
		for _, c := range callers {
			if i >= len(c.args) {
				return nil, false
			}
			add(c.body, c.args[i])
		}
	case v.Parent() != nil && v.Parent() != v.Pkg().Scope():
		visit(b, b.node)
	default:
		return nil, false // a package-level variable: not followed
	}
	if !ok {
		return nil, false
	}
	sort.Strings(keys)
	return slices.Compact(keys), true
}

// decodedField reports whether v is a field of a struct whose fields carry
// encoding tags: decoded from data, so never assigned in code.
func (a *reach) decodedField(v *types.Var) bool {
	for _, p := range a.pkgs {
		for _, f := range p.Syntax {
			found := false
			ast.Inspect(f, func(n ast.Node) bool {
				field, ok := n.(*ast.Field)
				if !ok || found {
					return !found
				}
				for _, name := range field.Names {
					if p.TypesInfo.Defs[name] == v && field.Tag != nil {
						found = true
					}
				}
				return true
			})
			if found {
				return true
			}
		}
	}
	return false
}

func paramIndex(fn *types.Func, v *types.Var) int {
	ps := fn.Signature().Params()
	for i := 0; i < ps.Len(); i++ {
		if ps.At(i) == v {
			return i
		}
	}
	return -1
}

// callSite is one reached call of a Podmin function, for following its
// parameters back.
type callSite struct {
	body funcBody
	args []ast.Expr
}

func assignsTo(info *types.Info, l ast.Expr, v *types.Var) bool {
	switch l := l.(type) {
	case *ast.Ident:
		return info.Defs[l] == v || info.Uses[l] == v
	case *ast.SelectorExpr:
		return info.Uses[l.Sel] == v
	}
	return false
}

// calledFunc is the function a call names statically, or nil.
func calledFunc(info *types.Info, call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	default:
		return nil
	}
	fn, _ := info.Uses[id].(*types.Func)
	return fn
}
