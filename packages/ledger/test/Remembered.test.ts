/**
 * Remembered decisions: stored, listed, expired and revoked in a real database; scopes derived
 * narrowly from what was asked; and, over generated rules and requests (FastCheck), the two
 * promises: a remembered allow never turns a configured deny into an accept, and it never allows
 * anything outside its scope (checked against an independent reading of the request).
 */
import { assert, describe, it } from "@effect/vitest"
import { Policy, ShellCommand } from "@warden/approvals"
import type { Card } from "@warden/approvals"
import { PermissionsGrant, ServerRequests } from "@warden/protocol"
import { Effect, Either, FastCheck as fc, TestClock } from "effect"
import * as posix from "node:path/posix"
import * as Path from "node:path"
import { Ledger, Remembered } from "../src/index.js"
import {
  commandParams,
  denyCmd,
  fileChangeParams,
  mcpToolCallParams,
  permissionsParams,
  rules,
  tempDir
} from "./support.js"

const Cmd = "item/commandExecution/requestApproval"
const decode = (method: string, params: unknown) => ServerRequests.decode(0, method, params)
const cmd = (line: string) => decode(Cmd, commandParams("t", "u", line))

const rule = (
  scope: Remembered.RememberedScope,
  extra: Partial<Remembered.RememberedRule> = {}
): Remembered.RememberedRule => ({
  id: "m1",
  scope,
  author: "alice",
  createdAt: 0,
  expiresAt: undefined,
  from: undefined,
  note: undefined,
  revokedAt: undefined,
  revokedBy: undefined,
  ...extra
})

describe("remembered rules: storage", () => {
  it.scoped("remember, list, expire, revoke: in a real database", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      yield* TestClock.setTime(1_000)
      const ids = yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const git = yield* ledger.remember({
          scope: { _tag: "Command", argv: ["git", "status"], exact: false },
          author: "alice",
          from: { runId: "r1", cardId: "c3" },
          note: "read-only"
        })
        const repo = yield* ledger.remember({
          scope: { _tag: "Path", root: "/repo/src", target: "files" },
          author: "bob",
          expiresAt: 5_000
        })
        const mcp = yield* ledger.remember({ scope: { _tag: "Mcp", server: "probe", tool: "poke" }, author: "carol" })
        assert.deepStrictEqual(git, {
          id: git.id,
          scope: { _tag: "Command", argv: ["git", "status"], exact: false },
          author: "alice",
          createdAt: 1_000,
          expiresAt: undefined,
          from: { runId: "r1", cardId: "c3" },
          note: "read-only",
          revokedAt: undefined,
          revokedBy: undefined
        })
        return { git: git.id, repo: repo.id, mcp: mcp.id }
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const listed = yield* ledger.rememberedRules()
        assert.deepStrictEqual(
          listed.map((r) => [r.id, Remembered.describeScope(r.scope), r.author]),
          [
            [ids.git, "command git status …", "alice"],
            [ids.repo, "file changes under /repo/src", "bob"],
            [ids.mcp, "mcp probe.poke", "carol"]
          ]
        )
        // Expired: no longer in force, still listed with `all`.
        yield* TestClock.setTime(5_000)
        assert.deepStrictEqual(
          (yield* ledger.rememberedRules()).map((r) => r.id),
          [ids.git, ids.mcp]
        )
        const revoked = yield* ledger.revoke(ids.git, "dave")
        assert.strictEqual(revoked.revokedAt, 5_000)
        assert.strictEqual(revoked.revokedBy, "dave")
        yield* TestClock.setTime(6_000)
        const again = yield* ledger.revoke(ids.git, "erin")
        assert.deepStrictEqual([again.revokedAt, again.revokedBy], [5_000, "dave"])
        assert.deepStrictEqual(
          (yield* ledger.rememberedRules()).map((r) => r.id),
          [ids.mcp]
        )
        assert.deepStrictEqual(
          (yield* ledger.rememberedRules({ all: true })).map((r) => r.id),
          [ids.git, ids.repo, ids.mcp]
        )
        const missing = yield* Effect.flip(ledger.revoke("m-none", "dave"))
        assert.strictEqual(missing.reason, "NotFound")
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped(
    "refused as given: a root of /, a relative or dotted root, a secret in the argv or the tool, a masked value, no author, an expiry in the past",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        yield* TestClock.setTime(1_000)
        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const refused = (input: Remembered.RememberInput) =>
            Effect.map(Effect.flip(ledger.remember(input)), (e) => [e.reason, e.detail] as const)
          const cases: ReadonlyArray<readonly [Remembered.RememberInput, string]> = [
            [{ scope: { _tag: "Path", root: "/", target: "files" }, author: "a" }, "must not be /"],
            [{ scope: { _tag: "Path", root: "//", target: "permissions" }, author: "a" }, "must not be /"],
            [{ scope: { _tag: "Path", root: "repo", target: "files" }, author: "a" }, "absolute path"],
            [{ scope: { _tag: "Path", root: "/repo/../etc", target: "files" }, author: "a" }, ". or .. segments"],
            [
              { scope: { _tag: "Command", argv: ["mysql", "-pHunter2Secret9x", "shop"], exact: true }, author: "a" },
              "looks secret"
            ],
            [
              {
                scope: {
                  _tag: "Command",
                  argv: ["curl", "-H", "Authorization: Bearer abcdef0123456789abcdef"],
                  exact: false
                },
                author: "a"
              },
              "looks secret"
            ],
            [
              { scope: { _tag: "Mcp", server: "db", tool: "sk-proj-Q7vT2mX9pL4kR8nW3yH6bJ1cF5dG0sAeZu" }, author: "a" },
              "looks secret"
            ],
            // Built from a card's masked facts: the mask stands for a secret that is not there.
            [
              {
                scope: { _tag: "Command", argv: ["mysql", "-uroot", "-p•••", "-e", "select 1"], exact: true },
                author: "a"
              },
              "masked value"
            ],
            [{ scope: { _tag: "Path", root: "/home/•••/repo", target: "files" }, author: "a" }, "masked value"],
            [{ scope: { _tag: "Command", argv: [] as never, exact: true }, author: "a" }, "at argv"],
            [{ scope: { _tag: "Command", argv: ["ls"], exact: true }, author: "  " }, "needs an author"],
            [{ scope: { _tag: "Command", argv: ["ls"], exact: true }, author: "a", expiresAt: 500 }, "after now"]
          ]
          for (const [input, says] of cases) {
            const [reason, detail] = yield* refused(input)
            assert.strictEqual(reason, "Invalid")
            assert.include(detail, says)
          }
          assert.deepStrictEqual(yield* ledger.rememberedRules({ all: true }), [])
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )
})

describe("remembered rules: matching", () => {
  it("an exact command matches those words only; a prefix matches what starts with them; neither a compound command", () => {
    const exact = rule({ _tag: "Command", argv: ["git", "push", "origin", "main"], exact: true })
    const prefix = rule({ _tag: "Command", argv: ["git", "status"], exact: false })
    const match = (line: string, r: Remembered.RememberedRule) =>
      Remembered.rememberedFor(cmd(line), {}, [r], 0) !== undefined
    assert.isTrue(match("/bin/bash -lc 'git push origin main'", exact))
    assert.isTrue(match("git push origin main", exact))
    assert.isFalse(match("git push origin main --force", exact))
    assert.isFalse(match("git push origin", exact))
    assert.isTrue(match("git status --short", prefix))
    assert.isFalse(match("git status; rm -rf /", prefix))
    assert.isFalse(match("git status $(rm -rf /)", prefix))
    assert.isFalse(match("/bin/bash -lc 'git status && curl x | sh'", prefix))
    // legacy argv form, same semantics
    assert.isTrue(
      Remembered.rememberedFor(
        decode("execCommandApproval", {
          conversationId: "c",
          callId: "k",
          command: ["git", "push", "origin", "main"],
          cwd: "/r"
        }),
        {},
        [exact],
        0
      ) !== undefined
    )
  })

  it("expired and revoked rules never match; a path rule allows only changes certainly under its root; an MCP rule only its tool's yes/no approval", () => {
    const ls = { _tag: "Command", argv: ["ls"], exact: true } as const
    assert.isDefined(Remembered.rememberedFor(cmd("ls"), {}, [rule(ls, { expiresAt: 10 })], 9))
    assert.isUndefined(Remembered.rememberedFor(cmd("ls"), {}, [rule(ls, { expiresAt: 10 })], 10))
    assert.isUndefined(Remembered.rememberedFor(cmd("ls"), {}, [rule(ls, { revokedAt: 5 })], 1))

    const files = rule({ _tag: "Path", root: "/repo/src", target: "files" })
    const change = (
      paths: ReadonlyArray<string>,
      grantRoot?: string
    ): readonly [ServerRequests.DecodedRequest, Card.CardContext] => [
      decode("item/fileChange/requestApproval", fileChangeParams("t", "u", grantRoot)),
      { fileChanges: paths.map((path) => ({ path, kind: "update" })) }
    ]
    const allows = (
      [request, context]: readonly [ServerRequests.DecodedRequest, Card.CardContext],
      r: Remembered.RememberedRule
    ) => Remembered.rememberedFor(request, context, [r], 0) !== undefined
    assert.isTrue(allows(change(["/repo/src/a.ts", "/repo/src/b/c.ts"]), files))
    assert.isFalse(allows(change(["/repo/src/a.ts", "/repo/other.ts"]), files))
    assert.isFalse(allows(change(["/repo/src/../../etc/passwd"]), files))
    assert.isFalse(allows(change(["src/a.ts"]), files))
    assert.isFalse(allows(change([]), files))
    assert.isFalse(allows(change(["/repo/src/a.ts"], "/repo"), files))
    // A files rule is not a permissions grant.
    const asked = decode(
      "item/permissions/requestApproval",
      permissionsParams("t", "u", { fileSystem: { write: ["/repo/src/x"] } })
    )
    assert.isUndefined(Remembered.rememberedFor(asked, {}, [files], 0))
    const grants = rule({ _tag: "Path", root: "/repo/src", target: "permissions" })
    assert.isDefined(Remembered.rememberedFor(asked, {}, [grants], 0))
    const network = decode(
      "item/permissions/requestApproval",
      permissionsParams("t", "u", { fileSystem: { write: ["/repo/src/x"] }, network: { enabled: true } })
    )
    assert.isUndefined(Remembered.rememberedFor(network, {}, [grants], 0))

    const poke = rule({ _tag: "Mcp", server: "probe", tool: "poke" })
    assert.isDefined(
      Remembered.rememberedFor(
        decode("mcpServer/elicitation/request", mcpToolCallParams("t", "u", "probe", "poke", {})),
        {},
        [poke],
        0
      )
    )
    assert.isUndefined(
      Remembered.rememberedFor(
        decode("mcpServer/elicitation/request", mcpToolCallParams("t", "u", "probe", "drop", {})),
        {},
        [poke],
        0
      )
    )
    const withFields = {
      ...mcpToolCallParams("t", "u", "probe", "poke", {}),
      requestedSchema: { type: "object", properties: { why: { type: "string" } } }
    }
    assert.isUndefined(Remembered.rememberedFor(decode("mcpServer/elicitation/request", withFields), {}, [poke], 0))
  })

  it("decide: a configured deny wins over a remembered allow; a configured allow is named before it", () => {
    const everything = [rule({ _tag: "Command", argv: ["rm"], exact: false })]
    const configured = rules(denyCmd("no-rm-rf", "rm", "-rf"), {
      id: "ls-ok",
      effect: "allow",
      match: { command: { argvPrefix: ["rm", "-i"] } }
    })
    assert.deepStrictEqual(Remembered.decide(configured, everything, cmd("rm -rf build"), {}, 0), {
      _tag: "Deny",
      ruleId: "no-rm-rf"
    })
    assert.deepStrictEqual(Remembered.decide(configured, everything, cmd("rm -i x"), {}, 0), {
      _tag: "Allow",
      ruleId: "ls-ok"
    })
    assert.deepStrictEqual(Remembered.decide(configured, everything, cmd("rm x"), {}, 0), {
      _tag: "Remembered",
      rule: everything[0]!
    })
    assert.deepStrictEqual(Remembered.decide(undefined, [], cmd("rm x"), {}, 0), { _tag: "NoMatch" })
  })

  it("scopeFor derives the narrowest scope, or says why none", () => {
    const scope = (request: ServerRequests.DecodedRequest, context: Card.CardContext = {}) =>
      Remembered.scopeFor(request, context)
    assert.deepStrictEqual(
      scope(cmd("/bin/bash -lc 'git push origin main'")),
      Either.right({ _tag: "Command", argv: ["git", "push", "origin", "main"], exact: true })
    )
    assert.include(
      Either.getLeft(scope(cmd("git push && rm -rf /"))).pipe((o) => (o._tag === "Some" ? o.value : "")),
      "simple command"
    )
    assert.include(
      Either.getLeft(scope(cmd("mysql -pHunter2Secret9x shop"))).pipe((o) => (o._tag === "Some" ? o.value : "")),
      "looks secret"
    )
    assert.deepStrictEqual(
      scope(decode("item/fileChange/requestApproval", fileChangeParams("t", "u")), {
        fileChanges: [
          { path: "/repo/src/a/x.ts", kind: "add" },
          { path: "/repo/src/b/y.ts", kind: "update" }
        ]
      }),
      Either.right({ _tag: "Path", root: "/repo/src", target: "files" })
    )
    assert.isTrue(
      Either.isLeft(
        scope(decode("item/fileChange/requestApproval", fileChangeParams("t", "u")), {
          fileChanges: [{ path: "/a.ts", kind: "add" }]
        })
      )
    )
    assert.isTrue(
      Either.isLeft(
        scope(decode("item/fileChange/requestApproval", fileChangeParams("t", "u")), {
          fileChanges: [
            { path: "/repo/a.ts", kind: "add" },
            { path: "… 3 more changes", kind: "omitted" }
          ]
        })
      )
    )
    assert.deepStrictEqual(
      scope(
        decode(
          "item/permissions/requestApproval",
          permissionsParams("t", "u", { fileSystem: { read: ["/repo/docs"], write: ["/repo/src"] } })
        )
      ),
      Either.right({ _tag: "Path", root: "/repo", target: "permissions" })
    )
    assert.isTrue(
      Either.isLeft(
        scope(decode("item/permissions/requestApproval", permissionsParams("t", "u", { network: { enabled: true } })))
      )
    )
    assert.deepStrictEqual(
      scope(decode("mcpServer/elicitation/request", mcpToolCallParams("t", "u", "probe", "poke", {}))),
      Either.right({ _tag: "Mcp", server: "probe", tool: "poke" })
    )
    assert.isTrue(
      Either.isLeft(
        scope(decode("item/tool/requestUserInput", { threadId: "t", turnId: "u", itemId: "i", questions: [] }))
      )
    )
    // a legacy patch is read within the bounds the rules read (Json.keysWithin): more paths, or a change of many keys, cannot be placed
    const legacy = (fileChanges: unknown) =>
      decode("applyPatchApproval", { conversationId: "t", callId: "c", fileChanges })
    assert.deepStrictEqual(
      scope(legacy({ "/repo/src/a.ts": { add: { content: "" } } })),
      Either.right({ _tag: "Path", root: "/repo/src", target: "files" })
    )
    const many = Object.fromEntries(
      Array.from({ length: Policy.MaxPaths + 1 }, (_, i) => [`/repo/f${i}`, { add: { content: "" } }])
    )
    assert.deepStrictEqual(scope(legacy(many)), Either.left("too many changes to place"))
    const wideChange = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, { move_path: "/etc/passwd" }]))
    assert.deepStrictEqual(scope(legacy({ "/repo/a.ts": wideChange })), Either.left("too many changes to place"))
  })
})

// ---------------------------------------------------------------------------------------------
// Properties over generated rules and requests

const Words = [
  "git",
  "status",
  "push",
  "rm",
  "-rf",
  "-i",
  "ls",
  "make",
  "test",
  "npm",
  "publish",
  "curl",
  "x",
  "/bin/rm"
] as const
const Roots = ["/repo", "/repo/src", "/etc", "/home/u", "/"] as const
const Names = ["a.ts", "b/c.ts", "../../etc/passwd", "x"] as const

const word = fc.constantFrom(...Words)
const argv = fc.array(word, { minLength: 1, maxLength: 4 })
/** Rules name short prefixes (so they often match the generated commands). */
const prefix = fc.array(word, { minLength: 1, maxLength: 2 })

/** A command line: simple, compound, wrapped by codex's shell, with a substitution, after a runner. */
const commandLine = fc.oneof(
  argv.map((a) => ShellCommand.join(a)),
  fc
    .tuple(argv, fc.constantFrom("; ", " && ", " | ", " || "), argv)
    .map(([a, op, b]) => `${ShellCommand.join(a)}${op}${ShellCommand.join(b)}`),
  argv.map((a) => `/bin/bash -lc ${ShellCommand.quote(ShellCommand.join(a))}`),
  fc.tuple(argv, argv).map(([a, b]) => `${ShellCommand.join(a)} $(${ShellCommand.join(b)})`),
  argv.map((a) => `sudo ${ShellCommand.join(a)}`),
  fc
    .tuple(argv, argv)
    .map(([a, b]) => `/bin/bash -lc ${ShellCommand.quote(`${ShellCommand.join(a)}; ${ShellCommand.join(b)}`)}`)
)

const path = fc.oneof(
  fc.tuple(fc.constantFrom(...Roots), fc.constantFrom(...Names)).map(([r, n]) => (r === "/" ? `/${n}` : `${r}/${n}`)),
  fc.constantFrom(...Names)
)

interface Req {
  readonly request: ServerRequests.DecodedRequest
  readonly context: Card.CardContext
}

const request: fc.Arbitrary<Req> = fc.oneof(
  commandLine.map((line): Req => ({ request: cmd(line), context: {} })),
  fc.tuple(fc.array(path, { maxLength: 4 }), fc.option(fc.constantFrom(...Roots), { nil: undefined })).map(
    ([paths, grantRoot]): Req => ({
      request: decode("item/fileChange/requestApproval", fileChangeParams("t", "u", grantRoot)),
      context: { fileChanges: paths.map((p) => ({ path: p, kind: "update" })) }
    })
  ),
  fc.tuple(fc.array(path, { maxLength: 3 }), fc.array(path, { maxLength: 3 }), fc.boolean()).map(
    ([read, write, network]): Req => ({
      request: decode(
        "item/permissions/requestApproval",
        permissionsParams("t", "u", {
          fileSystem: { ...(read.length > 0 ? { read } : {}), ...(write.length > 0 ? { write } : {}) },
          ...(network ? { network: { enabled: true } } : {})
        })
      ),
      context: {}
    })
  ),
  fc.tuple(fc.constantFrom("probe", "db"), fc.constantFrom("poke", "drop"), fc.boolean()).map(
    ([server, tool, fields]): Req => ({
      request: decode("mcpServer/elicitation/request", {
        ...mcpToolCallParams("t", "u", server, tool, {}),
        ...(fields ? { requestedSchema: { type: "object", properties: { why: { type: "string" } } } } : {})
      }),
      context: {}
    })
  )
)

const configuredRule = (id: string) =>
  fc.oneof(
    fc
      .tuple(fc.constantFrom("allow", "deny"), prefix)
      .map(([effect, words]) => ({ id, effect, match: { command: { argvPrefix: words } } })),
    fc
      .tuple(fc.constantFrom("allow", "deny"), fc.constantFrom(...Roots))
      .map(([effect, under]) => ({ id, effect, match: { path: { under } } })),
    fc
      .tuple(
        fc.constantFrom("allow", "deny"),
        fc.constantFrom("probe", "db"),
        fc.option(fc.constantFrom("poke", "drop"), { nil: undefined })
      )
      .map(([effect, server, tool]) => ({
        id,
        effect,
        match: { mcp: tool === undefined ? { server } : { server, tool } }
      }))
  )

const configured: fc.Arbitrary<Policy.Rules> = fc
  .integer({ min: 0, max: 5 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => configuredRule(`r${i}`))).map((list) => rules(...list)))

const scope: fc.Arbitrary<Remembered.RememberedScope> = fc.oneof(
  fc.tuple(prefix, fc.boolean()).map(([a, exact]) => ({
    _tag: "Command" as const,
    argv: a as unknown as readonly [string, ...Array<string>],
    exact
  })),
  fc
    .tuple(
      fc.constantFrom("/repo", "/repo/src", "/etc", "/home/u"),
      fc.constantFrom("files" as const, "permissions" as const)
    )
    .map(([root, target]) => ({ _tag: "Path" as const, root, target })),
  fc
    .tuple(fc.constantFrom("probe", "db"), fc.constantFrom("poke", "drop"))
    .map(([server, tool]) => ({ _tag: "Mcp" as const, server, tool }))
)

const remembered: fc.Arbitrary<ReadonlyArray<Remembered.RememberedRule>> = fc
  .array(
    fc.tuple(
      scope,
      fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined }),
      fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined })
    ),
    { maxLength: 5 }
  )
  .map((list) => list.map(([s, expiresAt, revokedAt], i) => rule(s, { id: `m${i}`, expiresAt, revokedAt })))

const now = fc.integer({ min: 0, max: 20 })

/** A deny rule aimed at the request (its first word, its first path's directory, its MCP server). */
const denyAimedAt = ({ context, request }: Req): unknown => {
  if (request._tag !== "Known") return undefined
  const first = (paths: ReadonlyArray<string>) => paths.find((p) => p.startsWith("/"))
  switch (request.method) {
    case Cmd: {
      const word = ShellCommand.unwrap(request.params.command ?? "").argv?.[0]
      return word !== undefined ? denyCmd("aimed", word) : undefined
    }
    case "item/fileChange/requestApproval": {
      const p = first((context.fileChanges ?? []).map((c) => c.path))
      return p !== undefined ? { id: "aimed", effect: "deny", match: { path: { under: posix.dirname(p) } } } : undefined
    }
    case "item/permissions/requestApproval": {
      const asked = PermissionsGrant.readRequested(request.params.permissions)
      const p = Either.isRight(asked)
        ? first([...(asked.right.fileSystem?.read ?? []), ...(asked.right.fileSystem?.write ?? [])])
        : undefined
      return p !== undefined ? { id: "aimed", effect: "deny", match: { path: { under: p } } } : undefined
    }
    case "mcpServer/elicitation/request":
      return { id: "aimed", effect: "deny", match: { mcp: { server: request.params.serverName } } }
    default:
      return undefined
  }
}

/**
 * A request, configured rules, remembered rules, and the time. Half the time one of the
 * remembered rules is what a person answering "always" to this very request would have stored;
 * a third of the time the configured rules also hold a deny aimed at it (so the two meet often).
 */
const scenario = fc
  .tuple(request, configured, remembered, fc.boolean(), fc.integer({ min: 0, max: 2 }), now)
  .map(([req, conf, rem, answered, aim, at]) => {
    const derived = Remembered.scopeFor(req.request, req.context)
    const all = answered && Either.isRight(derived) ? [...rem, rule(derived.right, { id: "m-answered" })] : rem
    const aimed = aim === 0 ? denyAimedAt(req) : undefined
    return { req, configured: aimed !== undefined ? rules(...conf.rules, aimed) : conf, remembered: all, at }
  })

/** Independent reading: is the request certainly inside the scope? (Not the code under test.) */
const inside = (scope: Remembered.RememberedScope, { context, request }: Req): boolean => {
  if (request._tag !== "Known") return false
  const under = (p: string, root: string) =>
    p.startsWith("/") &&
    !p.split("/").includes("..") &&
    (posix.resolve(p) === root || posix.resolve(p).startsWith(`${root}/`))
  switch (scope._tag) {
    case "Command": {
      if (request.method !== Cmd) return false
      const u = ShellCommand.unwrap(request.params.command ?? "")
      if (!u.simple || u.argv === undefined) return false
      const starts = scope.argv.every((w, i) => u.argv![i] === w)
      return starts && (!scope.exact || u.argv.length === scope.argv.length)
    }
    case "Path": {
      if (request.method === "item/fileChange/requestApproval") {
        const paths = (context.fileChanges ?? []).map((c) => c.path)
        const grantRoot = request.params.grantRoot
        return (
          scope.target === "files" &&
          paths.length > 0 &&
          paths.every((p) => under(p, scope.root)) &&
          (grantRoot === undefined || grantRoot === null || under(grantRoot, scope.root))
        )
      }
      if (request.method === "item/permissions/requestApproval") {
        const asked = PermissionsGrant.readRequested(request.params.permissions)
        if (scope.target !== "permissions" || Either.isLeft(asked) || asked.right.network?.enabled === true)
          return false
        const all = [...(asked.right.fileSystem?.read ?? []), ...(asked.right.fileSystem?.write ?? [])]
        return all.length > 0 && all.every((p) => under(p, scope.root))
      }
      return false
    }
    case "Mcp": {
      if (request.method !== "mcpServer/elicitation/request") return false
      const p = request.params
      const props = (p.requestedSchema as { properties?: object } | undefined)?.properties ?? {}
      return (
        p.serverName === scope.server &&
        p._meta?.["tool_name"] === scope.tool &&
        p._meta?.["codex_approval_kind"] === "mcp_tool_call" &&
        Object.keys(props).length === 0
      )
    }
  }
}

describe("remembered rules: properties", () => {
  it("a remembered allow never turns a configured deny into an accept, and allows only what is inside its scope", () => {
    // How often the cases that matter came up (the property would hold vacuously without them).
    let denyOverRemembered = 0
    let rememberedAllows = 0
    fc.assert(
      fc.property(scenario, ({ at, configured: configuredRules, remembered: rememberedRules, req }) => {
        const configuredVerdict = Policy.evaluate(configuredRules, req.request, req.context)
        const verdict = Remembered.decide(configuredRules, rememberedRules, req.request, req.context, at)
        // Deny wins: whatever is remembered, the configured verdict stands when it decides.
        if (configuredVerdict._tag !== "NoMatch") {
          if (
            configuredVerdict._tag === "Deny" &&
            Remembered.rememberedFor(req.request, req.context, rememberedRules, at) !== undefined
          ) {
            denyOverRemembered++
          }
          assert.deepStrictEqual(verdict, configuredVerdict)
          return
        }
        if (verdict._tag === "Remembered") {
          rememberedAllows++
          assert.isTrue(Remembered.isActive(verdict.rule, at), "an expired or revoked rule matched")
          assert.isTrue(
            inside(verdict.rule.scope, req),
            `${Remembered.describeScope(verdict.rule.scope)} allowed what it does not cover`
          )
        } else {
          assert.strictEqual(verdict._tag, "NoMatch")
        }
      }),
      { numRuns: 2_000 }
    )
    assert.isAbove(denyOverRemembered, 50)
    assert.isAbove(rememberedAllows, 50)
  })

  it("the scope derived from a request covers that request, and only what is inside it", () => {
    let derivedScopes = 0
    fc.assert(
      fc.property(request, request, (asked, other) => {
        const derived = Remembered.scopeFor(asked.request, asked.context)
        if (Either.isLeft(derived)) return
        derivedScopes++
        const r = rule(derived.right)
        assert.strictEqual(
          Remembered.rememberedFor(asked.request, asked.context, [r], 0),
          r,
          `${Remembered.describeScope(derived.right)} does not cover its own request`
        )
        if (Remembered.rememberedFor(other.request, other.context, [r], 0) !== undefined) {
          assert.isTrue(
            inside(derived.right, other),
            `${Remembered.describeScope(derived.right)} allowed what it does not cover`
          )
        }
      }),
      { numRuns: 2_000 }
    )
    assert.isAbove(derivedScopes, 200)
  })
})

// The deny property, once more with the rules a person is likeliest to hold: a remembered prefix
// of everything and a configured deny of one word.
describe("remembered rules: the obvious case", () => {
  it("remembering `rm` does not let `rm -rf` through a deny of `rm -rf`", () => {
    const verdict = Remembered.decide(
      rules(denyCmd("no-rm-rf", "rm", "-rf")),
      [rule({ _tag: "Command", argv: ["rm"], exact: false })],
      cmd("/bin/bash -lc 'rm -rf /'"),
      {},
      0
    )
    assert.deepStrictEqual(verdict, { _tag: "Deny", ruleId: "no-rm-rf" })
  })
})
