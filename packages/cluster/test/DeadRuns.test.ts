/**
 * A dead runner's ledger run is recorded `crashed`: the rule (`DeadRuns.deadRuns`, pure, each
 * case) and the sweep a live runner makes (`DeadRuns.sweepOnce`) on one SQLite database holding
 * the engine's runners table and the ledger, with the other runners' runs recorded by a ledger of
 * their own (as another process's would be).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { Storage } from "@warden/cluster"
import { Ledger } from "@warden/ledger"
import { Context, Duration, Effect, Layer } from "effect"
import * as Os from "node:os"
import * as DeadRuns from "../src/internal/DeadRuns.js"
import * as ItemStore from "../src/internal/ItemStore.js"

const HOUR = 3_600_000
const now = 10 * HOUR

const run = (runId: string, over: Partial<Ledger.RunRecord> & { readonly address?: string }): Ledger.RunRecord => ({
  runId,
  startedAt: now - HOUR,
  endedAt: undefined,
  status: "running",
  label: `runner ${over.address ?? "?"}`,
  info: over.address === undefined ? { kind: "run" } : { address: over.address },
  pid: 100,
  host: "host-b",
  resumedFrom: undefined,
  droppedEvents: 0,
  lostEvents: 0,
  unjournaledAnswers: 0,
  ...over
})

const decide = (runs: ReadonlyArray<Ledger.RunRecord>, heartbeats: ReadonlyArray<[string, number]>) =>
  DeadRuns.deadRuns({
    runs,
    self: "self",
    host: "host-a",
    now,
    deadAfterMs: 5 * 60_000,
    heartbeatAgeMs: new Map(heartbeats),
    alive: (pid) => pid !== 666
  }).map((d) => `${d.runId}:${d.why}`)

describe("a dead runner's ledger run", () => {
  it("the rule: restarted at its address, its process gone on this host, or silent past deadAfter; never self, never a fresh or heard one", () => {
    // A later run at the same address: the earlier is dead whatever its heartbeat says.
    assert.deepStrictEqual(
      decide(
        [
          run("old", { address: "10.0.0.2:7100", startedAt: now - 2 * HOUR }),
          run("new", { address: "10.0.0.2:7100", startedAt: now - 60_000 })
        ],
        [["10.0.0.2:7100", 1_000]]
      ),
      ["old:restarted"]
    )
    // This host, its pid gone: dead at once; alive: not. Another host's pid is never checked.
    assert.deepStrictEqual(
      decide(
        [
          run("gone", { address: "10.0.0.1:7100", host: "host-a", pid: 666 }),
          run("here", { address: "10.0.0.1:7101", host: "host-a", pid: 7 }),
          run("far", { address: "10.0.0.3:7100", host: "host-c", pid: 666 })
        ],
        [
          ["10.0.0.1:7100", 1_000],
          ["10.0.0.1:7101", 1_000],
          ["10.0.0.3:7100", 1_000]
        ]
      ),
      ["gone:process-gone"]
    )
    // Silent: a heartbeat older than deadAfter, or none at all, for a run older than deadAfter.
    assert.deepStrictEqual(
      decide(
        [
          run("stale", { address: "10.0.0.4:7100" }),
          run("unlisted", { address: "10.0.0.5:7100" }),
          run("heard", { address: "10.0.0.6:7100" }),
          run("fresh", { address: "10.0.0.7:7100", startedAt: now - 60_000 })
        ],
        [
          ["10.0.0.4:7100", 6 * 60_000],
          ["10.0.0.6:7100", 4 * 60_000]
        ]
      ),
      ["stale:silent", "unlisted:silent"]
    )
    // Never this runner's own run, nor a run of another kind (no address), nor one no longer running.
    assert.deepStrictEqual(
      decide(
        [
          run("self", { address: "10.0.0.8:7100" }),
          run("plain", { host: "host-a", pid: 666 }),
          run("ended", { address: "10.0.0.9:7100", status: "ended" })
        ],
        []
      ),
      []
    )
  })

  it.live(
    "the sweep records a silent runner's run crashed, once, and leaves a heard one; a runner whose own run was recorded crashed is told to stop",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        // The engine's runners table, with the columns its SQLite lock storage gives it (that storage
        // itself holds the one connection of an in-memory database for its locks).
        yield* sql`CREATE TABLE ${sql(Storage.engineTable("runners"))} (machine_id INTEGER PRIMARY KEY AUTOINCREMENT,
          address TEXT NOT NULL UNIQUE, runner TEXT NOT NULL, healthy INTEGER NOT NULL DEFAULT 1,
          last_heartbeat DATETIME NOT NULL DEFAULT (CURRENT_TIMESTAMP))`
        const mine = Context.get(yield* Layer.build(Ledger.layer()), Ledger.Ledger)
        const others = Context.get(yield* Layer.build(Ledger.layer()), Ledger.Ledger)
        const self = yield* mine.beginRun({
          id: "rSelf",
          label: "runner 10.0.0.1:7100",
          info: { address: "10.0.0.1:7100" }
        })
        // Two runners of another host: one silent for an hour, one heard a moment ago.
        for (const [id, address] of [
          ["rSilent", "10.0.0.2:7100"],
          ["rHeard", "10.0.0.3:7100"]
        ] as const)
          yield* others.beginRun({ id, label: `runner ${address}`, info: { address }, host: "host-b", pid: 1 })
        yield* others.flush
        yield* mine.flush
        yield* sql`UPDATE ledger_runs SET started_at = ${Date.now() - HOUR} WHERE run_id IN ('rSilent', 'rHeard')`
        yield* sql`INSERT INTO ${sql(Storage.engineTable("runners"))} (address, runner, healthy, last_heartbeat)
          VALUES ('10.0.0.2:7100', 'x', 1, datetime('now', '-1 hour')), ('10.0.0.3:7100', 'y', 1, datetime('now'))`

        const store = yield* ItemStore.make
        const options = { ledger: mine, store, self: self.id, deadAfter: Duration.minutes(5) }
        const first = yield* DeadRuns.sweepOnce(options)
        assert.deepStrictEqual(first, {
          _tag: "Swept",
          marked: [{ runId: "rSilent", address: "10.0.0.2:7100", why: "silent", stranded: 0, settledInTable: 0 }]
        })
        const status = (id: string) => Effect.map(mine.runs(), (runs) => runs.find((r) => r.runId === id)?.status)
        assert.strictEqual(yield* status("rSilent"), "crashed")
        assert.strictEqual(yield* status("rHeard"), "running")
        assert.strictEqual(yield* status("rSelf"), "running")
        // Once: a second sweep finds nothing more.
        assert.deepStrictEqual(yield* DeadRuns.sweepOnce(options), { _tag: "Swept", marked: [] })

        // The runner that was silent comes back and sweeps: its own run is recorded crashed, it is told to stop.
        const back = yield* DeadRuns.sweepOnce({ ...options, ledger: others, self: "rSilent" })
        assert.strictEqual(back._tag, "OwnRunCrashed")
        if (back._tag === "OwnRunCrashed") assert.include(back.message, "away from the store for longer than deadAfter")
        // Its host is not this one: the process rule never applied (the silent rule did).
        assert.notStrictEqual(Os.hostname(), "host-b")
        // The ledgers close (their runs ended) before the database they write to.
      }).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename: ":memory:" }))),
    60_000
  )
})
