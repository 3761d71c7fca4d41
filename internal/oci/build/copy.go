// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

func (s *spec) evalCopy(in instruction, lookup func(string) (string, bool)) error {
	var ws []string
	f := map[string]string{}
	if a, ok := jsonArgs(in.args); ok {
		ws = a
	} else {
		raw, err := words(in.args)
		if err != nil {
			return in.errorf("%v", err)
		}
		f, ws = flags(raw)
	}
	c := copyStep{line: in.line, chmod: -1, display: "COPY " + in.args}
	for k, v := range f {
		v, err := expand(v, lookup)
		if err != nil {
			return in.errorf("%v", err)
		}
		switch k {
		case "chown":
			if c.uid, c.gid, err = parseChown(v); err != nil {
				return in.errorf("%v", err)
			}
			c.chown = true
		case "chmod":
			m, err := strconv.ParseInt(v, 8, 32)
			if err != nil || m < 0 || m > 0o7777 {
				return in.errorf("--chmod=%s must be an octal mode such as 0755", v)
			}
			c.chmod = m
		case "from":
			return in.errorf("--from copies from another stage or image, which podmin build does not support: build the files beforehand and COPY them from the context")
		default:
			return in.errorf("flag --%s is not supported: COPY takes --chown and --chmod", k)
		}
	}
	if len(ws) < 2 {
		return in.errorf("expected COPY SOURCE... DESTINATION")
	}
	for i, w := range ws {
		v, err := expand(w, lookup)
		if err != nil {
			return in.errorf("%v", err)
		}
		ws[i] = v
	}
	dst := ws[len(ws)-1]
	dir := strings.HasSuffix(dst, "/") || dst == "." || strings.HasSuffix(dst, "/.")
	if !path.IsAbs(dst) {
		dst = path.Join(s.workdir, dst)
	}
	dst = path.Clean(dst)
	if len(ws) > 2 && !dir {
		return in.errorf("several sources need a directory destination ending in '/', got %q", ws[len(ws)-1])
	}
	if dir {
		dst = strings.TrimSuffix(dst, "/") + "/"
	}
	for _, src := range ws[:len(ws)-1] {
		clean := path.Clean("/" + src)[1:]
		if clean == "" {
			clean = "."
		}
		if path.IsAbs(src) && src != "/" || strings.HasPrefix(path.Clean(src), "..") {
			return in.errorf("source %q leaves the build context: sources are relative to the context directory", src)
		}
		c.srcs = append(c.srcs, clean)
	}
	c.dst = dst
	s.copies = append(s.copies, c)
	return nil
}

// parseChown reads --chown=UID[:GID]. Names need /etc/passwd, which a
// packaging build cannot consult.
func parseChown(v string) (uid, gid int, err error) {
	u, g, hasG := strings.Cut(v, ":")
	uid, err = strconv.Atoi(u)
	if err == nil && hasG {
		gid, err = strconv.Atoi(g)
	} else if err == nil {
		gid = uid
	}
	if err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("--chown=%s must be numeric UID[:GID] such as 65532:65532: the build cannot resolve user names", v)
	}
	return uid, gid, nil
}
