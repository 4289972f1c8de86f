/**
 * A thread that moves with its item (real codex 0.171.0): two `warden runner` processes on a
 * throwaway PostgreSQL, each with its own codex home (as two hosts have), and a client of the
 * fleet in this process. Runner A runs an item's first turn (the model is told a word) and opens a
 * card in its second; runner B joins and A is SIGKILLed with the card open. B takes the item, finds
 * its thread in A's codex home, which it cannot read, restores the rollout A kept in the store
 * after the first turn, resumes the thread and runs the second turn again: the model's request from
 * B holds the first turn (the word and the model's answer), the card A left open is stranded once,
 * and the item completes on B.
 */
import { assert, describe, it } from "@effect/vitest"
import { ClusterClient, Storage } from "@warden/cluster"
import * as Postgres from "@warden/test-support/Postgres"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import { ProcessTree, RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Context, Effect, Fiber, Layer, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { lastShards, startRunner, until } from "./support/Fleet.js"
import * as Codex from "./support/Codex.js"

/** Every rollout file under a codex home's `sessions/`. */
const rollouts = (home: string): ReadonlyArray<string> => {
  const dir = Path.join(home, "sessions")
  if (!Fs.existsSync(dir)) return []
  return (Fs.readdirSync(dir, { recursive: true }) as Array<string>).filter((f) => f.endsWith(".jsonl"))
}

describe("a thread that moves with its item to another codex home (real codex 0.171.0)", () => {
  it.scopedLive(
    "a runner SIGKILLed mid-turn: the item's thread is restored on the other runner from the fleet's store and resumed with its history",
    () =>
      Effect.gen(function* () {
        const lane = "mv"
        const codex = yield* Codex.setup({
          lanes: {
            [lane]: [
              Step.message("first answer: PELICAN noted"),
              Step.execCommand({ cmd: "echo warden-moved", escalated: true, justification: "thread move test" }),
              Step.message("second turn done")
            ]
          }
        })
        // Runner B's own codex home: nothing of A's threads is in it.
        const launchB = yield* RealCodex.make({ baseUrl: codex.model.baseUrl })
        assert.notStrictEqual(launchB.codexHome, codex.launch.codexHome)
        const pg = yield* Postgres.start()
        const runner = (launch: RealCodex.Launch) => startRunner({ cluster: pg.url, launch })
        const a = yield* runner(codex.launch)
        yield* until("runner A holding the 300 shards", () => lastShards(a.cli) === 300)

        const clientContext = yield* Layer.build(
          ClusterClient.layer({ sharding: shardingTimings }).pipe(Layer.provide(Storage.layer(pg.url)))
        )
        const client = Context.get(clientContext, ClusterClient.ClusterClient)
        const item = "moving-1"
        const lines: Array<Record<string, unknown>> = []
        yield* client.follow(item).pipe(
          Stream.runForEach((e) => Effect.sync(() => lines.push(e.line))),
          Effect.forkScoped
        )
        const run = yield* client
          .run(item, {
            prompt: `${ScriptedModel.laneMarker(lane)} remember the word PELICAN`,
            followUps: [`${ScriptedModel.laneMarker(lane)} now run the command`],
            cwd: codex.launch.workspace,
            sandbox: "workspace-write"
          })
          .pipe(Effect.forkScoped)
        // The first turn completed on A (its state kept), the second asks its card there.
        yield* until("the second turn's card on runner A", () =>
          lines.some((l) => l["type"] === "card.opened" && l["runner"] === a.address)
        )
        const card = String(lines.find((l) => l["type"] === "card.opened")!["card"])
        assert.strictEqual(rollouts(launchB.codexHome).length, 0)

        const b = yield* runner(launchB)
        const codexOfA = ProcessTree.descendants(a.cli.pid)
        process.kill(-a.cli.pid, "SIGKILL")
        yield* a.cli.exited("30 seconds")

        const result = yield* Fiber.join(run).pipe(Effect.timeout("300 seconds"))
        assert.strictEqual(result._tag, "Completed", JSON.stringify(result))
        if (result._tag === "Completed") {
          assert.strictEqual(result.turns, 2)
          assert.isAtLeast(result.moves, 1)
          assert.strictEqual(result.finalMessage, "second turn done")
        }
        // The run's result can come back before the follower has the new owner's lines (it
        // subscribes again once the dead runner's stream fails): wait for it to reach the end.
        yield* until(
          "the follower reaching the item's end",
          () => lines.some((l) => l["type"] === "item.finished"),
          "120 seconds"
        )
        const ready = lines.find((l) => l["type"] === "thread.ready")
        const restored = lines.filter((l) => l["type"] === "thread.restored")
        assert.strictEqual(restored.length, 1, JSON.stringify(lines.map((l) => l["type"])))
        assert.strictEqual(restored[0]!["threadId"], ready?.["threadId"])
        assert.strictEqual(restored[0]!["turns"], 1)
        assert.isFalse(lines.some((l) => l["type"] === "thread.fresh"))
        // The thread is in B's codex home now, and B resumed it (not a new thread).
        assert.isTrue(rollouts(launchB.codexHome).some((f) => f.endsWith(`-${String(ready?.["threadId"])}.jsonl`)))
        if (result._tag === "Completed") assert.strictEqual(result.threadId, ready?.["threadId"])
        // The model's request for the second turn from B holds the first turn: the word and the answer.
        const requests = (yield* codex.model.requests).filter((r) => r.lane === lane)
        const last = JSON.stringify(requests[requests.length - 1])
        assert.include(last, "PELICAN")
        assert.include(last, "first answer: PELICAN noted")
        // A's card settled once: stranded by B (A died with it open), or refused by A if the item's
        // shard went to B while A was still alive (B's joining rebalances the shards).
        const settled = lines.filter(
          (l) => l["type"] === "card.settled" && l["card"] === card && l["replayed"] !== true
        )
        assert.strictEqual(settled.length, 1, JSON.stringify(settled))
        assert.include(["stranded", "refused"], settled[0]!["outcome"])

        // No process left behind: A's codex died with it; B stops on SIGTERM.
        yield* until("runner A's codex gone", () => codexOfA.every((pid) => !ProcessTree.isAlive(pid)), "60 seconds")
        const codexOfB = ProcessTree.descendants(b.cli.pid)
        process.kill(-b.cli.pid, "SIGTERM")
        const exitedB = yield* b.cli.exited("60 seconds")
        assert.notStrictEqual(exitedB.signal, "SIGKILL")
        yield* until("runner B's codex gone", () => codexOfB.every((pid) => !ProcessTree.isAlive(pid)), "60 seconds")
      }),
    600_000
  )
})
