/**
 * FastArgs (the start-up's reader of a plain `warden run` command line) against @effect/cli's own
 * parse of the same options: whatever FastArgs accepts, @effect/cli accepts with the same value;
 * everything else FastArgs declines (and @effect/cli decides, as before).
 */
import { Command, CliConfig } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, expect, it } from "@effect/vitest"
import { macrotask } from "@warden/test-support/EventLoop"
import { Console, Duration, Effect, Exit, FastCheck as fc, Option } from "effect"
import * as FastArgs from "../src/startup/FastArgs.js"
import * as RunCommand from "../src/commands/RunCommand.js"

const silent: Console.Console = {
  [Console.TypeId]: Console.TypeId,
  assert: () => Effect.void,
  clear: Effect.void,
  count: () => Effect.void,
  countReset: () => Effect.void,
  debug: () => Effect.void,
  dir: () => Effect.void,
  dirxml: () => Effect.void,
  error: () => Effect.void,
  group: () => Effect.void,
  groupEnd: Effect.void,
  info: () => Effect.void,
  log: () => Effect.void,
  table: () => Effect.void,
  time: () => Effect.void,
  timeEnd: () => Effect.void,
  timeLog: () => Effect.void,
  trace: () => Effect.void,
  warn: () => Effect.void,
  unsafe: console
}

/** What @effect/cli hands the `run` handler for `args` (after the executable), or undefined when it does not run the handler. */
const effectCliParse = (args: ReadonlyArray<string>): Promise<RunCommand.Parsed | undefined> => {
  let captured: RunCommand.Parsed | undefined
  const run = Command.make("run", RunCommand.options, (parsed) => Effect.sync(() => void (captured = parsed)))
  const root = Command.make("warden").pipe(Command.withSubcommands([run]))
  const cli = Command.run(root, { name: "warden", version: "0.0.0" })
  return Effect.runPromise(
    cli(["node", "warden", ...args]).pipe(
      Effect.exit,
      Effect.withConsole(silent),
      Effect.provide(NodeContext.layer),
      Effect.provide(CliConfig.layer(CliConfig.defaultConfig))
    )
  ).then((exit) => (Exit.isSuccess(exit) ? captured : undefined))
}

const fast = (args: ReadonlyArray<string>) => FastArgs.parseRun<RunCommand.Parsed>(RunCommand.options, "prompts", args)

describe("FastArgs: warden run's plain command lines without @effect/cli's parser", () => {
  it("reads the usual command lines, with the values @effect/cli gives", async () => {
    const lines: Array<Array<string>> = [
      ["run", "--codex", "/opt/codex", "--restarts", "0", "--approvals", "deny", "start-up"],
      [
        "run",
        "--json",
        "--approvals",
        "stdin",
        "--concurrency",
        "100",
        "--sandbox",
        "workspace-write",
        "fix the bug",
        "write tests"
      ],
      [
        "run",
        "-c",
        "model_reasoning_effort=low",
        "--config",
        "a.b=1",
        "--enable",
        "x",
        "--enable",
        "y",
        "--no-state",
        "hello"
      ],
      [
        "run",
        "--rules=policy.yaml",
        "--approval-timeout",
        "2m",
        "--stall-timeout=30s",
        "--audit",
        "audit.jsonl",
        "--max-tokens",
        "5000",
        "go"
      ],
      [
        "run",
        "--inbox",
        "127.0.0.1:0",
        "--approvals",
        "inbox",
        "--notify",
        "https://hooks.example/x",
        "--worktree",
        "--base",
        "main",
        "a",
        "b",
        "c"
      ]
    ]
    for (const line of lines) {
      const parsed = fast(line)
      assert.isDefined(parsed, line.join(" "))
      expect(parsed).toEqual(await effectCliParse(line))
    }
    const first = fast(lines[0]!)!
    assert.strictEqual(first.codex, "/opt/codex")
    assert.strictEqual(first.restarts, 0)
    assert.deepStrictEqual(first.approvals, Option.some("deny"))
    assert.deepStrictEqual(first.prompts, ["start-up"])
    assert.strictEqual(Duration.toMillis(first.approvalTimeout), 15 * 60_000)
    assert.strictEqual(first.json, false)
  })

  it("declines what @effect/cli must decide or word: built-ins, unknown or misspelt names, bad values, options after a PROMPT", async () => {
    const declined: Array<Array<string>> = [
      ["run", "--help"],
      ["run", "--version", "x"],
      ["run", "--wizard"],
      ["run", "--log-level", "debug", "x"],
      ["run", "--concurency", "3", "x"],
      ["run", "--JSON", "x"],
      ["run", "--concurrency", "0", "x"],
      ["run", "--concurrency", "many", "x"],
      ["run", "--sandbox", "none", "x"],
      ["run", "--approval-timeout", "soon", "x"],
      ["run", "--model", "a", "--model", "b", "x"],
      ["run", "--json", "true", "x"],
      ["run", "--json", "x", "--no-state"],
      ["run", "--", "-x"],
      ["run", "-ck=v", "x"],
      ["run", "--model"],
      ["run", "--model", "--json", "x"],
      ["run", "--json"],
      ["run", "--enable=x", "fix it"],
      ["resume", "x"]
    ]
    for (const line of declined) assert.isUndefined(fast(line), line.join(" "))
  })

  it("property: whatever it accepts, @effect/cli parses to the same value", async () => {
    const names = [
      "--cwd",
      "--codex",
      "--config",
      "-c",
      "--enable",
      "--disable",
      "--model",
      "--sandbox",
      "--approval-policy",
      "--approvals",
      "--rules",
      "--approval-timeout",
      "--request-timeout",
      "--stall-timeout",
      "--json",
      "--audit",
      "--otlp",
      "--concurrency",
      "--max-tokens",
      "--max-turn-time",
      "--run-max-tokens",
      "--fixed-concurrency",
      "--admission-recovery",
      "--pool",
      "--restarts",
      "--worktree",
      "--base",
      "--keep-worktrees",
      "--state",
      "--no-state",
      "--inbox",
      "--inbox-allow-remote",
      "--inbox-public-url",
      "--notify",
      "--notify-secret",
      "--help",
      "-h",
      "--version",
      "--wizard",
      "--log-level",
      "--completions",
      "--Json",
      "--concurency",
      "--",
      "-",
      "-ck"
    ]
    const values = [
      "x",
      "1",
      "0",
      "7",
      "-3",
      "many",
      "5s",
      "15m",
      "soon",
      "0s",
      "deny",
      "stdin",
      "prompt",
      "inbox",
      "none",
      "read-only",
      "workspace-write",
      "never",
      "on-request",
      "k=v",
      "novalue",
      "127.0.0.1:8420",
      "8420",
      "[::1]:1",
      "http://h/x",
      "ftp://h",
      "true",
      "false",
      "yes",
      "no",
      " padded ",
      "",
      "two words",
      "--json",
      "-c"
    ]
    const token = fc.oneof(
      { arbitrary: fc.constantFrom(...names), weight: 4 },
      { arbitrary: fc.constantFrom(...values), weight: 4 },
      {
        arbitrary: fc.tuple(fc.constantFrom(...names), fc.constantFrom(...values)).map(([n, v]) => `${n}=${v}`),
        weight: 1
      }
    )
    // Values each option takes, so that many generated lines are plain (flags alone: the empty list).
    const good: Record<string, ReadonlyArray<string>> = {
      "--cwd": [".", "x"],
      "--codex": ["x"],
      "--config": ["k=v", "a.b=1"],
      "-c": ["k=v"],
      "--enable": ["x"],
      "--disable": ["x"],
      "--model": ["x", "true"],
      "--sandbox": ["read-only", "workspace-write"],
      "--approval-policy": ["never", "on-request"],
      "--approvals": ["deny", "stdin", "inbox"],
      "--rules": ["x"],
      "--approval-timeout": ["5s", "15m"],
      "--request-timeout": ["5s"],
      "--stall-timeout": ["15m"],
      "--audit": ["x"],
      "--otlp": ["http://h/x"],
      "--concurrency": ["1", "7"],
      "--max-tokens": ["7"],
      "--max-turn-time": ["5s"],
      "--run-max-tokens": ["1"],
      "--admission-recovery": ["5s"],
      "--pool": ["1", "7"],
      "--restarts": ["0", "7"],
      "--base": ["x"],
      "--state": ["x"],
      "--inbox": ["8420", "127.0.0.1:8420", "[::1]:1"],
      "--inbox-public-url": ["http://h/x"],
      "--notify": ["http://h/x"],
      "--notify-secret": ["x"],
      "--json": [],
      "--fixed-concurrency": [],
      "--worktree": [],
      "--keep-worktrees": [],
      "--no-state": [],
      "--inbox-allow-remote": []
    }
    const plain = fc
      .constantFrom(...Object.keys(good))
      .chain((n) =>
        good[n]!.length === 0
          ? fc.constant([n])
          : fc.constantFrom(...good[n]!).chain((v) => fc.constantFrom([n, v], [`${n}=${v}`]))
      )
    // Mostly plain options, some an arbitrary name and value (or a lone token): the lines near the edge of the plain shape.
    const option = fc.oneof(
      { arbitrary: plain, weight: 8 },
      { arbitrary: fc.tuple(fc.constantFrom(...names), fc.constantFrom(...values)).map(([n, v]) => [n, v]), weight: 3 },
      { arbitrary: fc.constantFrom(...names).map((n) => [n]), weight: 3 },
      { arbitrary: token.map((t) => [t]), weight: 1 }
    )
    const prompts = fc.oneof(
      { arbitrary: fc.array(fc.constantFrom("fix it", "a", "b c", "true"), { minLength: 1, maxLength: 3 }), weight: 4 },
      { arbitrary: fc.array(fc.constantFrom("fix it", "-x", " --json", "--json", "-"), { maxLength: 3 }), weight: 1 }
    )
    const line = fc
      .tuple(fc.array(option, { maxLength: 6 }), prompts)
      .map(([options, prompts]) => ["run", ...options.flat(), ...prompts])
    let accepted = 0
    let checked = 0
    await fc.assert(
      fc.asyncProperty(line, async (args) => {
        // The event loop turns between cases: the parses resolve through microtasks only, and
        // 3,000 of them in one stretch held this worker for 40 s on a busy machine (longer than
        // vitest allows its worker to leave a call of its main process unanswered).
        await macrotask()
        checked++
        const parsed = fast(args)
        if (parsed === undefined) return
        accepted++
        expect(parsed, args.join(" ")).toEqual(await effectCliParse(args))
      }),
      { numRuns: 3000 }
    )
    // The generator must reach the fast path often enough for the comparison to mean something.
    assert.isAbove(accepted, 600, `${accepted} of ${checked} generated command lines were accepted`)
  }, 120_000)
})
