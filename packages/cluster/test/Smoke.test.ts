import { describe, expect, it } from "@effect/vitest"
import { ClusterClient, Storage } from "@warden/cluster"
import { Postgres } from "@warden/testkit"
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import * as Path from "node:path"
import { spawnTsx } from "./support/Proc.js"

const runnerScript = Path.join("packages", "cluster", "test", "fixtures", "runner.ts")

describe("smoke", () => {
  it.live("one runner runs one item", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const a = yield* spawnTsx(runnerScript, { WARDEN_CLUSTER_URL: pg.url, WARDEN_RUNNER_PORT: "35101", WARDEN_RUNNER_NAME: "a" })
      yield* a.waitForJson("ready", (l) => l.type === "runner.shards" && l.count === 300, "90 seconds")
      const client = yield* Layer.build(ClusterClient.layer().pipe(Layer.provide(Storage.layer(pg.url))))
      const c = client.pipe((ctx) => ctx.unsafeMap.get(ClusterClient.ClusterClient.key)) as ClusterClient.ClusterClientShape
      const events = yield* c.events("item-1").pipe(
        Stream.tap((e) => Effect.log(JSON.stringify(e.line))),
        Stream.tap((e) => e.line["type"] === "card.opened" ? c.answer("item-1", String(e.line["card"]), { _tag: "Accept" }).pipe(Effect.tap((r) => Effect.log(r))) : Effect.void),
        Stream.runCollect,
        Effect.fork
      )
      const result = yield* c.run("item-1", { prompt: "hello" })
      yield* Effect.log(result)
      expect(result._tag).toBe("Completed")
      void events
      void ManagedRuntime
    }).pipe(Effect.scoped), 180_000)
})
