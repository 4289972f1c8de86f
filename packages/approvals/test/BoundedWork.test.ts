import { assert, describe, it } from "@effect/vitest"
import { JsonCensus } from "@warden/json"
import { ServerRequests } from "@warden/protocol"
import { Adversarial } from "@warden/testkit"
import { macrotask } from "@warden/test-support/EventLoop"
import { allowCmd, allowPath, denyCmd, denyPath, rules } from "@warden/test-support/PolicyRules"
import type { CardContext } from "../src/Card.js"
import { fileChangesOf, MaxFileChanges } from "../src/Card.js"
import * as CardSummary from "../src/internal/CardSummary.js"
import * as Policy from "../src/Policy.js"
import * as SafetyFilter from "../src/internal/SafetyFilter.js"
import * as SecretMask from "../src/SecretMask.js"
import * as ShellCommand from "../src/ShellCommand.js"
import { known } from "./Captured.js"

// Everything Warden does per server request runs on the connection's read loop, and a model writes
// the commands and the arguments. These inputs took minutes (and gigabytes) before the work was made
// linear: a test here that hangs until vitest's timeout is how a regression shows. No assertion is
// on time (the suite runs on a busy 2-core machine): the checks are on the answers, and on work
// counted in characters where the code counts it.

const { Mask } = SecretMask
const ids = { threadId: Adversarial.ThreadId, turnId: Adversarial.TurnId, itemId: Adversarial.ItemId }

/** Allow rules for the first word of every command shape (none may match: all are compound or too long). */
const allowFirstWords = ["sudo", "env", "eval", "echo", "true", "a", "bash", "cat", "/bin/bash", "ls"].map((w) =>
  allowCmd(`allow-${w}`, w)
)
const withDeny = rules(
  denyCmd("no-rm", "rm"),
  denyPath("etc", "/etc"),
  ...allowFirstWords,
  allowPath("repo", "/work/repo"),
  {
    id: "probe",
    effect: "allow",
    match: { mcp: { server: "probe" } }
  }
)
const allowOnly = rules(...allowFirstWords, allowPath("repo", "/work/repo"))

const Deny = (ruleId: string): Policy.Verdict => ({ _tag: "Deny", ruleId })
const NoMatch: Policy.Verdict = { _tag: "NoMatch" }

const cmd = (command: string) => known("item/commandExecution/requestApproval", { ...ids, command, cwd: "/work/repo" })

/** The synchronous path of the read loop for one server request (see ConnectionCards.open). */
const readLoop = (shape: Adversarial.Shape) => {
  const frame = JSON.parse(shape.frame) as { id: number; method: string; params: unknown }
  const context: CardContext =
    shape.itemStarted !== undefined
      ? { fileChanges: fileChangesOf((JSON.parse(shape.itemStarted) as { params: { item: unknown } }).params.item) }
      : {}
  const request = ServerRequests.decode(frame.id, frame.method, frame.params)
  return {
    request,
    context,
    summary: CardSummary.summarize(request, context),
    denyFirst: Policy.evaluate(withDeny, request, context),
    allowOnly: Policy.evaluate(allowOnly, request, context),
    safety: SafetyFilter.check(request)
  }
}

/**
 * Runs `check` on each item (a shape, a reading of one) in turn, giving the event loop back
 * between them: one is milliseconds of work, all of them a minute on a starved machine, and a
 * worker that holds its event loop that long loses its calls to vitest's main process.
 */
const eachInTurn = async <A>(list: ReadonlyArray<A>, check: (item: A) => void) => {
  for (const item of list) {
    check(item)
    await macrotask()
  }
}

/** A bound for the longest tests here that only a hung test reaches, even on a starved machine. */
const ShapesBound = 600_000

describe("bounded work per frame: the adversarial frames (testkit Adversarial, 1 MiB each)", () => {
  const shapes = Adversarial.shapes({ frameBytes: 1024 * 1024 })

  it("every frame goes through decode, summary, rules and the safety filter, with bounded results", {
    timeout: ShapesBound
  }, async () => {
    assert.isAbove(shapes.length, 40)
    await eachInTurn(shapes, (shape) => {
      const { safety, summary } = readLoop(shape)
      assert.isAtMost(summary.title.length, CardSummary.Bounds.title, shape.name)
      assert.notInclude(summary.title, "\n", shape.name)
      // what a card carries is bounded whatever came in (diffs share 200 000 characters, values 100 000)
      assert.isBelow(JSON.stringify(summary.summary).length, 600_000, shape.name)
      assert.oneOf(safety._tag, ["Safe", "Unsafe"], shape.name)
    })
  })

  it("every command shape hiding `rm -rf ~` is denied, and no allow rule allows a compound one", {
    timeout: ShapesBound
  }, async () => {
    const commands = shapes.filter(
      (s) => s.target === "shell" && (s.command?.includes(Adversarial.Payload) ?? s.name === "legacy-exec-argv")
    )
    assert.isAbove(commands.length, 18)
    let compound = 0
    await eachInTurn(commands, (shape) => {
      const { allowOnly: allowed, denyFirst, request } = readLoop(shape)
      assert.deepStrictEqual(denyFirst, Deny("no-rm"), shape.name)
      // `sudo bash -c x ...` is one simple command: an allow on `sudo` allows it (and a deny on rm still wins)
      const line =
        request._tag === "Known" && request.method === "item/commandExecution/requestApproval"
          ? (request.params.command ?? "")
          : ""
      if (line.length > 0 && line.length <= Policy.MaxCommandLength && ShellCommand.unwrap(line).simple) return
      compound++
      assert.notStrictEqual(allowed._tag, "Allow", shape.name)
    })
    assert.isAbove(compound, 15)
  })

  it("the file shapes: a path outside the root anywhere in the list is denied, never allowed", {
    timeout: ShapesBound
  }, async () => {
    await eachInTurn(
      shapes.filter((s) => s.target === "fileChange"),
      (shape) => {
        const { allowOnly: allowed, denyFirst } = readLoop(shape)
        assert.deepStrictEqual(denyFirst, Deny("etc"), shape.name)
        assert.deepStrictEqual(allowed, NoMatch, shape.name)
      }
    )
  })

  it("hostile forms, questions and URLs are refused by the filter, not by an exception", {
    timeout: ShapesBound
  }, async () => {
    await eachInTurn(
      shapes.filter((s) => s.target === "filter"),
      (shape) => {
        const { safety } = readLoop(shape)
        assert.strictEqual(safety._tag, "Unsafe", shape.name)
        if (safety._tag === "Unsafe") assert.notInclude(safety.reason, "could not be read", shape.name)
      }
    )
  })
})

describe("a bound never turns a deny into a miss", () => {
  const noRm = rules(
    denyCmd("no-rm", "rm"),
    allowCmd("true", "true"),
    allowCmd("sudo", "sudo"),
    allowCmd("eval", "eval")
  )

  it("sudo followed by 32,000 words, then rm: denied; every start is an index, none a copy", () => {
    const line = `sudo ${"a ".repeat(32_000)}; rm -rf ~`
    assert.deepStrictEqual(Policy.evaluate(noRm, cmd(line), {}), Deny("no-rm"))
    const read = ShellCommand.commands(line)
    assert.isTrue(read.complete)
    // one start per word after the runner (and the rm segment), all sharing the segment's words
    assert.strictEqual(read.starts.length, 32_002)
    assert.strictEqual(new Set(read.starts.map((s) => s.words)).size, 2)
    assert.isAtMost(read.work, 2 * line.length, "each character lexed about once")
  })

  it("the command after 600 segments is still read (the old list stopped at 512)", () => {
    const line = `${"true; ".repeat(600)}rm -rf /`
    assert.deepStrictEqual(Policy.evaluate(noRm, cmd(line), {}), Deny("no-rm"))
    assert.isTrue(ShellCommand.commands(line).complete)
    assert.lengthOf(ShellCommand.segments(line), 512, "segments() is a bounded list for display")
  })

  it("nesting deeper than is followed makes the line incomplete: denied, never allowed", () => {
    const heredocs = (levels: number) =>
      `${Array.from({ length: levels }, (_, i) => `bash <<A${i}`).join("\n")}\nrm -rf ~\n${Array.from({ length: levels }, (_, i) => `A${levels - 1 - i}`).join("\n")}`
    const deep = [
      `${"eval ".repeat(20)}rm -rf ~`,
      `echo ${"$(".repeat(20)}true${")".repeat(20)}; rm -rf ~`,
      heredocs(12),
      `sudo ${"eval ".repeat(13_000)}rm -rf ~`
    ]
    for (const line of deep) {
      const read = ShellCommand.commands(line)
      assert.isFalse(read.complete, line.slice(0, 40))
      assert.isAtMost(read.work, ShellCommand.WorkPerChar * (line.length + 1024))
      assert.deepStrictEqual(Policy.evaluate(noRm, cmd(line), {}), Deny("no-rm"), line.slice(0, 40))
      // a deny that names something else entirely still matches: what was not read may run anything
      assert.deepStrictEqual(
        Policy.evaluate(rules(denyCmd("no-curl", "curl")), cmd(line), {}),
        Deny("no-curl"),
        line.slice(0, 40)
      )
      assert.notStrictEqual(Policy.evaluate(noRm, cmd(line), {})._tag, "Allow")
    }
    // the same kinds of nesting within the bounds are read in full
    for (const line of [`${"eval ".repeat(5)}rm -rf ~`, heredocs(5), Adversarial.nestedBash(12, "rm -rf ~")]) {
      assert.isTrue(ShellCommand.commands(line).complete, line.slice(0, 40))
      assert.deepStrictEqual(Policy.evaluate(noRm, cmd(line), {}), Deny("no-rm"), line.slice(0, 40))
    }
  })

  it("option readers (shell options, env -S, su -c, ssh, trap, alias) repeated after a runner: bounded, denied", {
    timeout: ShapesBound
  }, async () => {
    const fill = (head: string, unit: string, tail: string) =>
      head + unit.repeat(Math.floor((60_000 - head.length - tail.length) / unit.length)) + tail
    const lines = [
      fill("sudo ", "su ", "-c 'rm -rf ~'"),
      fill("sudo ", "env -u ", "rm -rf ~"),
      fill("sudo ", "bash -o ", "-c 'rm -rf ~'"),
      fill("sudo ", "trap ", "'rm -rf ~'"),
      fill("sudo ", "ssh ", "rm -rf ~"),
      fill("sudo ", "alias a=b ", "; rm -rf ~"),
      fill("sudo ", "fish ", "-c 'rm -rf ~'"),
      fill("", "env -S ", "'rm -rf ~'"),
      fill("sudo ", "bash -c ", "'rm -rf ~'"),
      fill("find . ", "-exec find ", "-exec rm -rf ~"),
      fill("sudo bash ", "-o x ", "-c 'rm -rf ~'"),
      fill("sudo ", "env -S env ", "-S 'rm -rf ~'"),
      fill("sudo ", "flock -c ", "'rm -rf ~'"),
      fill("sudo ", "watch ", "'rm -rf ~'")
    ]
    // A line is about a second of work on a busy machine: the event loop turns between lines.
    await eachInTurn(lines, (line) => {
      const read = ShellCommand.commands(line)
      assert.isAtMost(read.work, ShellCommand.WorkPerChar * (line.length + 1024), line.slice(0, 30))
      assert.deepStrictEqual(Policy.evaluate(noRm, cmd(line), {}), Deny("no-rm"), line.slice(0, 30))
      // one simple command (`sudo su su ... -c 'rm -rf ~'`) is allowed by an allow on its first word, as any
      // simple command is (a deny on rm still wins); a compound one never is
      if (!ShellCommand.unwrap(line).simple) {
        assert.notStrictEqual(
          Policy.evaluate(
            rules(allowCmd("sudo", "sudo"), allowCmd("env", "env"), allowCmd("find", "find")),
            cmd(line),
            {}
          )._tag,
          "Allow",
          line.slice(0, 30)
        )
      }
    })
  })

  it("the legacy argv is joined only until it is too long to read", () => {
    const argv = ["sudo", ...Array.from({ length: 200_000 }, () => "a"), "rm", "-rf", "~"]
    const joined = ShellCommand.join(argv, Policy.MaxCommandLength)
    assert.isAbove(joined.length, Policy.MaxCommandLength)
    assert.isBelow(joined.length, Policy.MaxCommandLength + 10)
    const legacy = known("execCommandApproval", { conversationId: "c", callId: "x", command: argv, cwd: "/" })
    assert.deepStrictEqual(Policy.evaluate(noRm, legacy, {}), Deny("no-rm"))
    assert.deepStrictEqual(Policy.evaluate(rules(allowCmd("sudo", "sudo")), legacy, {}), NoMatch)
  })
})

describe("a bound never turns a path deny into an allow", () => {
  const repo = rules(allowPath("repo", "/work/repo"))
  const elsewhere = rules(denyPath("secrets", "/srv/secrets"), allowPath("repo", "/work/repo"))
  const fc = known("item/fileChange/requestApproval", ids)
  const changesItem = (paths: ReadonlyArray<string>) => ({
    type: "fileChange",
    id: "i",
    changes: paths.map((path) => ({ path, kind: { type: "add" }, diff: "" }))
  })

  it("201 changes, the 201st outside the repository: not allowed (the old list kept the first 200)", () => {
    const paths = [...Array.from({ length: 200 }, (_, i) => `/work/repo/f${i}`), "/etc/passwd"]
    const context = { fileChanges: fileChangesOf(changesItem(paths)) }
    assert.lengthOf(context.fileChanges, 201)
    assert.deepStrictEqual(Policy.evaluate(repo, fc, context), NoMatch)
    assert.deepStrictEqual(Policy.evaluate(rules(denyPath("etc", "/etc")), fc, context), Deny("etc"))
  })

  it("more changes than are kept: never allowed, and a path deny matches whatever it names", () => {
    const paths = Array.from({ length: MaxFileChanges + 5 }, (_, i) => `/work/repo/f${i}`)
    const changes = fileChangesOf(changesItem(paths))
    assert.lengthOf(changes, MaxFileChanges + 1)
    assert.strictEqual(changes[MaxFileChanges]!.path, "… 5 more changes")
    assert.deepStrictEqual(Policy.evaluate(repo, fc, { fileChanges: changes }), NoMatch)
    assert.deepStrictEqual(Policy.evaluate(elsewhere, fc, { fileChanges: changes }), Deny("secrets"))
    // within the bound, the same list is read in full and allowed
    assert.deepStrictEqual(Policy.evaluate(elsewhere, fc, { fileChanges: changes.slice(0, MaxFileChanges) }), {
      _tag: "Allow",
      ruleId: "repo"
    })
    const { summary, title } = CardSummary.summarize(fc, { fileChanges: changes })
    assert.isTrue(title.startsWith("write 200+ files"), title)
    if (summary.kind === "fileChange") {
      assert.lengthOf(summary.changes, CardSummary.Bounds.changes + 1)
      assert.strictEqual(
        summary.changes.at(-1)!.path,
        `… ${MaxFileChanges + 5 - CardSummary.Bounds.changes} more changes`
      )
    }
  })

  it("legacy patches and permission requests with more paths than are read: same", () => {
    const many = Array.from({ length: Policy.MaxPaths + 1 }, (_, i) => `/work/repo/f${i}`)
    const legacy = known("applyPatchApproval", {
      conversationId: "c",
      callId: "x",
      fileChanges: Object.fromEntries(many.map((p) => [p, { add: { content: "" } }]))
    })
    const perms = known("item/permissions/requestApproval", {
      ...ids,
      cwd: "/",
      permissions: { fileSystem: { write: many } }
    })
    for (const request of [legacy, perms]) {
      assert.deepStrictEqual(Policy.evaluate(repo, request, {}), NoMatch, request.method)
      assert.deepStrictEqual(Policy.evaluate(elsewhere, request, {}), Deny("secrets"), request.method)
    }
    assert.strictEqual(CardSummary.summarize(perms, {}).title, `grant ${many.length} paths (too many to list)`)
  })
})

describe("masking hostile text: linear, and the secrets inside still masked", () => {
  it("1 MB of overlapping candidates (a=a=..., --x --x ..., Bearer Bearer ...) with a secret in the shown part", () => {
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      [`note: ${"a=".repeat(500_000)}`, "password=hunter2", `password=${Mask}`],
      [`${"--x ".repeat(250_000)}`, "--token s3cr3tValue", `--token ${Mask}`],
      [`${"Bearer ".repeat(150_000)}`, "Bearer abcdefgh12345678", `Bearer ${Mask}`],
      [`${"a.".repeat(500_000)}`, "api_key: hunter2hunter2", `api_key: ${Mask}`],
      [`${"a://a:".repeat(170_000)}`, "https://u:hunter2@example.com", `https://u:${Mask}@example.com`]
    ]
    for (const [filler, secret, masked] of cases) {
      const text = `${secret} ${filler}`
      for (const out of [SecretMask.maskText(text), SecretMask.maskShown(text, 2_000)]) {
        assert.notInclude(out, secret.split(/[ =:@]/).at(-2) === "u" ? "hunter2" : secret, secret)
        assert.isTrue(out.startsWith(masked), `${secret}: ${out.slice(0, 60)}`)
        assert.isTrue(out.endsWith("…"))
      }
      assert.isAtMost(SecretMask.maskShown(text, 2_000).length, 2_000)
      // a secret past what is shown is not shown either
      assert.notInclude(SecretMask.maskShown(`${filler} ${secret}`, 2_000), secret)
    }
  })

  it("maskShown gives what maskText then truncate gives, on the text a card shows", () => {
    const texts = [
      "export DB_PASSWORD=hunter2 && run",
      `curl -H 'Authorization: Bearer abcdefgh12345678' ${"x".repeat(5_000)}`,
      `${"y ".repeat(3_000)}token=abc123`,
      "git status",
      `${"eyJhbGciOiJIUzI1NiJ9.".repeat(2)}${"a".repeat(20_000)}`
    ]
    for (const text of texts) {
      for (const max of [40, 160, 2_000, 20_000]) {
        const whole = SecretMask.truncate(SecretMask.maskText(text), max)
        const shown = SecretMask.maskShown(text, max)
        assert.isTrue(shown === whole || shown.includes(Mask), `${text.slice(0, 30)} @${max}`)
        if (!whole.includes(Mask)) assert.strictEqual(shown, whole, `${text.slice(0, 30)} @${max}`)
      }
    }
    // a token-like run the cut falls into is masked whole (its end is unknown)
    assert.strictEqual(SecretMask.maskShown(`ok ${"aB3".repeat(10_000)}`, 100), `ok ${Mask}…`)
  })

  it("maskArgv of 32,000 words and maskRecord of 1 MB values: bounded copies, secrets masked", () => {
    const argv = [...Array.from({ length: 32_000 }, () => "--x"), "--password", "hunter2", "--token=abc"]
    const out = SecretMask.maskArgv(argv)
    assert.deepStrictEqual(out.slice(-3), ["--password", Mask, `--token=${Mask}`])

    const huge = "a=".repeat(500_000)
    const record = Object.fromEntries(
      Array.from({ length: 300 }, (_, i) => [`k${i}`, i === 0 ? `password=hunter2 ${huge}` : huge])
    )
    const masked = SecretMask.maskRecord(record)
    const json = JSON.stringify(masked)
    assert.notInclude(json, "hunter2")
    assert.isBelow(json.length, 150_000, "maxTotal: 100 000 characters of strings in all")
    assert.strictEqual(masked["…"], "200 more keys")
    assert.include(Object.values(masked), SecretMask.Elided, "strings past the budget are left out")
  })

  it("deep JSON (200,000 levels) never reaches the stack; wide JSON is copied within the value budget", () => {
    const deepObject = JSON.parse(Adversarial.deepObject(200_000)) as unknown
    const deepArray = JSON.parse(Adversarial.deepArray(200_000)) as unknown
    for (const value of [deepObject, deepArray]) {
      const masked = SecretMask.maskRecord({ value })
      assert.include(JSON.stringify(masked), Mask)
      assert.isBelow(JSON.stringify(masked).length, 1_000)
    }
    const wide = JSON.parse(`{${Adversarial.upTo(2_000_000, (i) => `"k${i}":{"a":[1,2,3],"token":"x"}`)}}`) as Record<
      string,
      unknown
    >
    const copy = JSON.stringify(SecretMask.maskRecord(wide, { maxEntries: 1_000_000, maxKeys: 1_000_000 }))
    assert.isBelow(copy.length, 200_000, "maxValues: 2 000 values in all")
    assert.notInclude(copy, '"token":"x"')

    const tool = known("item/tool/call", { ...ids, callId: "c", tool: "t", namespace: null, arguments: deepObject })
    assert.include(CardSummary.summarize(tool, {}).title, "tool t(")
    const form = known("mcpServer/elicitation/request", {
      threadId: "t",
      serverName: "probe",
      mode: "form",
      message: "m",
      requestedSchema: { type: "object", properties: { a: deepObject } }
    })
    assert.strictEqual(SafetyFilter.check(form)._tag, "Unsafe")
    assert.strictEqual(CardSummary.summarize(form, {}).summary.kind, "elicitation")
  })
})

describe("objects' keys: read within budgets, a frame's large object never enumerated", () => {
  // In V8 reading any key of an object reads all of them (even a for...in that stops at once): the
  // 1.85 million keys of a 16 MiB frame's object cost a second. What is counted here is every read
  // of a key list: a Proxy's `ownKeys` runs for Object.keys, for...in, Object.entries/values,
  // getOwnPropertyNames and JSON.stringify alike. Its size is registered as the transport's census
  // registers a frame's large objects (JsonCensus).
  const counted = (n: number, value: (i: number) => unknown = () => 1) => {
    const target: Record<string, unknown> = {}
    for (let i = 0; i < n; i++) target[`k${i}`] = value(i)
    let reads = 0
    const proxy = new Proxy(target, {
      ownKeys: (t) => {
        reads += n
        return Reflect.ownKeys(t)
      }
    })
    JsonCensus.note(proxy, n)
    return { proxy, reads: () => reads }
  }
  const Many = 200_000
  const toolCall = (toolParams: unknown) =>
    known("mcpServer/elicitation/request", {
      threadId: "t",
      serverName: "probe",
      mode: "form",
      message: 'Allow the probe server to run tool "poke"?',
      requestedSchema: { type: "object", properties: {} },
      _meta: { codex_approval_kind: "mcp_tool_call", tool_name: "poke", tool_params: toolParams }
    })
  const form = (schema: unknown) =>
    known("mcpServer/elicitation/request", {
      threadId: "t",
      serverName: "s",
      mode: "form",
      message: "Fill in",
      requestedSchema: schema
    })
  /** Everything ConnectionCards.open runs on the read loop for a request (the summary as on first read). */
  const all = (request: ServerRequests.ServerRequest) => ({
    offers: ServerRequests.offersFor(request),
    summary: CardSummary.summarize(request, {}),
    denyFirst: Policy.evaluate(withDeny, request, {}),
    allowOnly: Policy.evaluate(allowOnly, request, {}),
    safety: SafetyFilter.check(request)
  })

  it("tool arguments, dynamic tool arguments, permissions: a copy of the large object says how many keys, unread", () => {
    const params = counted(Many)
    const tool = all(toolCall(params.proxy))
    assert.strictEqual(params.reads(), 0)
    assert.deepStrictEqual(tool.summary.summary.kind === "mcpToolCall" && tool.summary.summary.inputs, {
      "…": `${Many} more keys`
    })
    assert.deepStrictEqual(tool.denyFirst, { _tag: "Allow", ruleId: "probe" }) // the server rule reads no argument

    const args = counted(Many)
    const dynamic = all(
      known("item/tool/call", { ...ids, callId: "c", tool: "t", namespace: null, arguments: args.proxy })
    )
    assert.strictEqual(args.reads(), 0)
    assert.deepStrictEqual(dynamic.summary.summary.kind === "dynamicTool" && dynamic.summary.summary.arguments, {
      "…": `${Many} more keys`
    })

    const network = counted(Many)
    all(
      known("item/permissions/requestApproval", {
        ...ids,
        cwd: "/",
        permissions: { fileSystem: { write: ["/work/repo/a"] }, extra: network.proxy }
      })
    )
    assert.strictEqual(network.reads(), 0)
  })

  it("legacy patches: a record of more paths than rules read, or a change of many keys, is never enumerated and never allowed", () => {
    const paths = counted(Many, () => ({ add: { content: "" } }))
    const legacy = all(known("applyPatchApproval", { conversationId: "c", callId: "x", fileChanges: paths.proxy }))
    assert.strictEqual(paths.reads(), 0)
    assert.deepStrictEqual(legacy.denyFirst, Deny("etc"))
    assert.deepStrictEqual(legacy.allowOnly, NoMatch)
    assert.include(legacy.summary.title, "changes not known")
    const shown = legacy.summary.summary.kind === "fileChange" ? legacy.summary.summary.changes : []
    assert.deepStrictEqual(
      shown.map((c) => c.path),
      [`… ${Many} more changes`]
    )

    // one path inside the repository whose change hides its move target among many keys
    const change = counted(Many, () => ({ move_path: "/etc/passwd" }))
    const moved = all(
      known("applyPatchApproval", { conversationId: "c", callId: "x", fileChanges: { "/work/repo/a": change.proxy } })
    )
    assert.strictEqual(change.reads(), 0)
    assert.deepStrictEqual(moved.denyFirst, Deny("etc"))
    assert.deepStrictEqual(moved.allowOnly, NoMatch)
  })

  it("forms: too many fields, or a field schema of many keys, refused by the filter unread", () => {
    const fields = counted(Many, () => ({ type: "string" }))
    const wide = all(form({ type: "object", properties: fields.proxy }))
    assert.strictEqual(fields.reads(), 0)
    assert.deepStrictEqual(wide.safety, { _tag: "Unsafe", reason: `form has ${Many} fields (limit 8)` })
    assert.notInclude(wide.offers, "Accept") // a form with fields is not answered by a bare accept

    const field = counted(Many)
    const one = all(form({ type: "object", properties: { f: field.proxy } }))
    assert.strictEqual(field.reads(), 0)
    assert.strictEqual(one.safety._tag, "Unsafe")
    const schema = counted(Many)
    assert.strictEqual(all(form(schema.proxy)).safety._tag, "Unsafe")
    assert.strictEqual(schema.reads(), 0)
  })

  it("a masked copy reads at most maxKeys keys in all, however many objects it visits", () => {
    const objects = Array.from({ length: 30 }, () => counted(5_000))
    const copy = SecretMask.maskRecord({ list: objects.map((o) => o.proxy) })
    const reads = objects.reduce((sum, o) => sum + o.reads(), 0)
    assert.isAtMost(reads, 20_000, "the default maxKeys")
    assert.isAbove(reads, 0, "objects within the budget are read")
    const list = copy["list"] as ReadonlyArray<Record<string, unknown>>
    assert.include(
      list.map((o) => o["…"]),
      "5000 more keys"
    )
  })
})
