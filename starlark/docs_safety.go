// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

// Safety documents opaque secrets, the scrubber, confirmation and content
// pinning; it follows Overview in docs/starlark.md and "podmin help
// starlark". Its python examples run, and their output is checked, in
// docs_safety_test.go.
const Safety = "## Secrets, confirmation and pinned recipes\n\n" +
	`### Secrets are values, not strings

A secret is an opaque value of type secret. podmin.secret(value, key = …) makes
one from a literal, podmin.secrets.read returns one, and secrets.create and
secrets.update take one as value =. It prints as <secret KEY>; it has no
attributes, no len(), no indexing, slicing or iteration; + and % with a str
fail; it cannot be a dict key or a JSON value; == and != compare it with another
secret only.

` + "```python" + `
token = podmin.secret("tok-4f9a1c2e77", key = "api-token")
print(token, "%s" % token)
podmin.secrets.create("api-token", for_ = "web", value = token)
copy = podmin.secrets.read("api-token", for_ = "web")
print(copy == token, type(copy))
` + "```" + `

` + "```text" + `
<secret api-token> <secret api-token>
True secret
` + "```" + `

Every byte Podmin writes — stdout, stderr, error messages and backtraces, fail()
text, dry-run plans, test reports, the REPL and its history — passes one
scrubber. It replaces each registered value, and its JSON- and Go-quoted, hex,
URL-escaped and base64 forms (at any alignment inside a longer base64 text),
with <secret KEY>. A value is registered the moment it enters the process: read
from --stdin, --file or the terminal, read from a provider, or written as a
literal given to podmin.secret or to value = — literals are registered before
the file starts to run, so printing one early prints <secret KEY> (the REPL runs
one input at a time, so there a str printed before the input that makes it a
secret is printed as it is). Values
shorter than 6 bytes are not scrubbed (they would make every output unreadable);
they stay opaque all the same. A str copy of a value that Podmin never saw as a
secret is an ordinary string: wrap it with podmin.secret first.

The REPL's history (repl_history in the Podmin data directory) is mode 0600 and
never keeps a line that contains a registered value.

### Confirmation

Every builtin that deletes or destroys something — deployments.delete,
secrets.delete, secrets.destroy, contexts.disconnect, cluster.teardown,
cluster.destroy, uninstall.cloudflared — takes confirm and fails before it does
anything without it: pass confirm = True, or confirm = "<cluster ID>" to also
check which cluster it acts on, or start the run with podmin run --yes (-y).
confirm = "<cluster ID>" is a check, not an answer: naming another cluster
refuses the call under every flag, --yes included, and so does confirm = False,
the script's own "no"; --yes only answers calls without confirm =. A script
never prompts; the REPL asks you to type the
cluster ID on a terminal, as the CLI commands do (they need --yes (-y)
otherwise). An unconfirmed or refused destructive operation exits with status
4. A dry run needs no confirmation: it changes nothing, and its plan marks each
destructive call, and those a real run would still have to confirm.

` + "```python" + `
d = podmin.deployments.delete("web", nodegroup = "workers", ignore_not_found = True, confirm = True)
print(d.action)
` + "```" + `

` + "```text" + `
absent
` + "```" + `

### Pinned recipes

podmin.star.lock pins each @name repository to a path or a git commit and to
the SHA-256 of each of its .star files plus a digest over them all. Every file
loaded from the repository — by @name//path or by a load inside it — is checked
against the lock before it runs; a changed file of a local path fails with its
path and both digests. "podmin recipes lock [DIR]" fetches each repository and
writes the digests; review a repository's changes before you lock it again.

A git pin's content is its commit's: the cached clone is proven to be exactly
the commit, from the commit's own objects, every time it is used. A modified,
added or missing file in it is tampering or corruption, never a change to
accept: loading and "podmin recipes lock" refuse it and name the copy to remove
(it is cloned again). Digests locked for a commit that differ from its content
are refused the same way.
`
