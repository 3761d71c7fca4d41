// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"fmt"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// spec is a Containerfile evaluated for one platform.
type spec struct {
	from       string
	env        [][2]string
	labels     map[string]string
	workdir    string
	copies     []copyStep
	entrypoint []string
	cmd        []string
	setEntry   bool
	setCmd     bool
}

// copyStep is one COPY with its sources and options expanded.
type copyStep struct {
	line    int
	srcs    []string
	dst     string // absolute, trailing slash kept
	uid     int
	gid     int
	chown   bool
	chmod   int64 // -1 when unset
	display string
}

// unsupported says why an instruction is refused and what to use instead.
var unsupported = map[string]string{
	"RUN":         "it executes commands inside the image, which needs a container runtime; podmin build only packages files: run the commands on the host or in CI and COPY their output",
	"ADD":         "it downloads URLs and unpacks archives implicitly; download or unpack beforehand and use COPY",
	"USER":        "set securityContext.runAsUser in the Pod instead (FROM scratch images already run as 65532)",
	"EXPOSE":      "declare ports in the DaemonSet's containers and the Service instead",
	"VOLUME":      "declare volumes in the Pod instead",
	"HEALTHCHECK": "use readiness and liveness probes in the Pod instead",
	"STOPSIGNAL":  "set it in the Pod's container lifecycle instead",
	"SHELL":       "there is no RUN to use a shell",
	"ONBUILD":     "triggers need a multi-stage or runtime build",
	"MAINTAINER":  "use LABEL org.opencontainers.image.authors=... instead",
}

// supported lists the instructions podmin build understands, for errors.
const supported = "FROM, ARG, ENV, LABEL, WORKDIR, COPY, ENTRYPOINT and CMD"

// predefined returns the automatic platform arguments.
func predefined(p v1.Platform) map[string]string {
	plat := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		plat += "/" + p.Variant
	}
	return map[string]string{"TARGETOS": p.OS, "TARGETARCH": p.Architecture, "TARGETVARIANT": p.Variant, "TARGETPLATFORM": plat}
}

// evaluate interprets the instructions for platform p.
func evaluate(ins []instruction, p v1.Platform) (spec, error) {
	auto := predefined(p)
	global := map[string]string{}
	args := map[string]string{} // declared inside the stage
	env := map[string]string{}
	s := spec{labels: map[string]string{}, workdir: "/"}
	fromSeen := false
	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		v, ok := args[name]
		return v, ok
	}
	for _, in := range ins {
		if reason, ok := unsupported[in.cmd]; ok {
			return spec{}, in.errorf("not supported by podmin build: %s", reason)
		}
		if in.cmd != "FROM" && in.cmd != "ARG" && !fromSeen {
			return spec{}, in.errorf("comes before FROM: start the Containerfile with FROM (ARG may precede it)")
		}
		var err error
		switch in.cmd {
		case "FROM":
			if fromSeen {
				return spec{}, in.errorf("a second FROM starts a multi-stage build, which podmin build does not support: build artifacts beforehand and COPY them into one stage")
			}
			fromSeen = true
			err = s.evalFrom(in, func(n string) (string, bool) {
				if v, ok := global[n]; ok {
					return v, true
				}
				v, ok := auto[n]
				return v, ok
			})
		case "ARG":
			err = evalArg(in, fromSeen, global, args, auto, lookup)
		case "ENV":
			err = s.evalPairs(in, lookup, func(k, v string) {
				env[k] = v
				s.env = append(s.env, [2]string{k, v})
			})
		case "LABEL":
			err = s.evalPairs(in, lookup, func(k, v string) { s.labels[k] = v })
		case "WORKDIR":
			err = s.evalWorkdir(in, lookup)
		case "COPY":
			err = s.evalCopy(in, lookup)
		case "ENTRYPOINT":
			s.entrypoint, s.setEntry = command(in.args), true
		case "CMD":
			s.cmd, s.setCmd = command(in.args), true
		default:
			return spec{}, in.errorf("unknown or unsupported instruction: podmin build supports %s", supported)
		}
		if err != nil {
			return spec{}, err
		}
	}
	if !fromSeen {
		return spec{}, fmt.Errorf("the Containerfile has no FROM: start it with FROM scratch or a base image")
	}
	return s, nil
}

func (s *spec) evalFrom(in instruction, lookup func(string) (string, bool)) error {
	ws, err := words(in.args)
	if err != nil {
		return in.errorf("%v", err)
	}
	f, ws := flags(ws)
	if len(f) > 0 {
		return in.errorf("flags are not supported: podmin build selects base platforms with --platform")
	}
	if len(ws) == 3 && strings.EqualFold(ws[1], "AS") {
		return in.errorf("named stages are for multi-stage builds, which podmin build does not support: drop \"AS %s\" and COPY prebuilt artifacts", ws[2])
	}
	if len(ws) != 1 {
		return in.errorf("expected FROM IMAGE, got %q", in.args)
	}
	if s.from, err = expand(ws[0], lookup); err != nil {
		return in.errorf("%v", err)
	}
	if s.from == "" {
		return in.errorf("%q expands to an empty image: give the ARG a default", ws[0])
	}
	return nil
}

func evalArg(in instruction, inStage bool, global, args, auto map[string]string, lookup func(string) (string, bool)) error {
	ws, err := words(in.args)
	if err != nil || len(ws) == 0 {
		return in.errorf("expected ARG NAME[=default]")
	}
	for _, w := range ws {
		name, def, hasDef := strings.Cut(w, "=")
		if !validName(name) {
			return in.errorf("invalid argument name %q", name)
		}
		if hasDef {
			if def, err = expand(def, lookup); err != nil {
				return in.errorf("%v", err)
			}
		}
		_, isAuto := auto[name]
		switch {
		case !inStage && isAuto && !hasDef:
			// Platform arguments are predefined in the global scope.
		case !inStage:
			global[name] = def
		case isAuto:
			args[name] = auto[name]
		case !hasDef:
			args[name] = global[name]
		default:
			args[name] = def
		}
	}
	return nil
}

func (s *spec) evalPairs(in instruction, lookup func(string) (string, bool), set func(k, v string)) error {
	expanded, err := expand(in.args, lookup)
	if err != nil {
		return in.errorf("%v", err)
	}
	ws, err := words(expanded)
	if err != nil || len(ws) == 0 {
		return in.errorf("expected KEY=VALUE pairs")
	}
	if !strings.Contains(ws[0], "=") { // legacy "ENV KEY VALUE"
		if len(ws) < 2 {
			return in.errorf("expected KEY=VALUE or KEY VALUE")
		}
		set(ws[0], strings.Join(ws[1:], " "))
		return nil
	}
	for _, w := range ws {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return in.errorf("%q is not KEY=VALUE", w)
		}
		set(k, v)
	}
	return nil
}

func (s *spec) evalWorkdir(in instruction, lookup func(string) (string, bool)) error {
	ws, err := words(in.args)
	if err != nil || len(ws) != 1 {
		return in.errorf("expected WORKDIR PATH")
	}
	dir, err := expand(ws[0], lookup)
	if err != nil {
		return in.errorf("%v", err)
	}
	if !path.IsAbs(dir) {
		dir = path.Join(s.workdir, dir)
	}
	s.workdir = path.Clean(dir)
	return nil
}

// command reads ENTRYPOINT or CMD in exec or shell form.
func command(args string) []string {
	if a, ok := jsonArgs(args); ok {
		return a
	}
	return []string{"/bin/sh", "-c", args}
}
