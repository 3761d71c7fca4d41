// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"encoding/json"
	"fmt"
	"strings"
)

// instruction is one logical Containerfile line.
type instruction struct {
	line int
	cmd  string // upper case
	args string // the rest, continuation lines joined
}

func (in instruction) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s: %s", in.line, in.cmd, fmt.Sprintf(format, args...))
}

// parse splits a Containerfile into instructions. Comments are whole lines
// starting with '#'; a trailing backslash continues a line.
func parse(src string) ([]instruction, error) {
	var out []instruction
	var cur *instruction
	for i, raw := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || (line == "" && cur == nil) {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		line = strings.TrimSuffix(line, `\`)
		if cur == nil {
			word, rest, _ := strings.Cut(line, " ")
			if tab := strings.IndexByte(word, '\t'); tab >= 0 {
				word, rest = word[:tab], word[tab+1:]+" "+rest
			}
			cur = &instruction{line: i + 1, cmd: strings.ToUpper(word), args: strings.TrimSpace(rest)}
		} else {
			cur.args = strings.TrimSpace(cur.args + " " + line)
		}
		if !cont {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the Containerfile has no instructions: start it with FROM")
	}
	return out, nil
}

// words splits s at unquoted blanks, removing quotes and backslash escapes.
func words(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote, inWord = c, true
		case c == '\\' && quote != '\'' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			inWord = true
		case quote == 0 && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		out = append(out, b.String())
	}
	return out, nil
}

// jsonArgs parses the exec form ["a", "b"]; ok is false for shell form.
func jsonArgs(s string) (args []string, ok bool) {
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	if err := json.Unmarshal([]byte(s), &args); err != nil {
		return nil, false
	}
	return args, true
}

// flags splits leading --name=value flags off an instruction's words.
func flags(ws []string) (map[string]string, []string) {
	f := map[string]string{}
	for len(ws) > 0 && strings.HasPrefix(ws[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(ws[0], "--"), "=")
		f[k] = v
		ws = ws[1:]
	}
	return f, ws
}

// expand substitutes $NAME, ${NAME}, ${NAME:-word}, ${NAME-word},
// ${NAME:+word} and ${NAME+word}; \$ is a literal dollar.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '$' {
			b.WriteString(`\$`)
			i++
			continue
		}
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			body := s[i+2 : i+end]
			i += end
			name, op, word := body, "", ""
			if j := strings.IndexAny(body, ":-+"); j >= 0 {
				name = body[:j]
				op = body[j:]
				if strings.HasPrefix(op, ":") && len(op) > 1 {
					op, word = op[:2], op[2:]
				} else {
					op, word = op[:1], op[1:]
				}
			}
			if !validName(name) {
				return "", fmt.Errorf("invalid variable reference ${%s}", body)
			}
			v, set := lookup(name)
			switch op {
			case "":
				b.WriteString(v)
			case ":-", "-":
				if set && (op == "-" || v != "") {
					b.WriteString(v)
				} else {
					b.WriteString(word)
				}
			case ":+", "+":
				if set && (op == "+" || v != "") {
					b.WriteString(word)
				}
			default:
				return "", fmt.Errorf("unsupported substitution ${%s}: use ${NAME}, ${NAME:-default} or ${NAME:+alternative}", body)
			}
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || isAlnum(s[j])) {
			j++
		}
		if j == i+1 {
			b.WriteByte(c)
			continue
		}
		v, _ := lookup(s[i+1 : j])
		b.WriteString(v)
		i = j - 1
	}
	return b.String(), nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '_' && !isAlnum(s[i]) {
			return false
		}
	}
	return true
}
