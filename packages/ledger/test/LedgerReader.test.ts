/**
 * The read-only ledger: reads what a ledger recorded without creating, migrating or writing
 * anything; a missing file, a file that is no ledger and a schema older than this code's are
 * refused with their reason. (A file the user may not write: apps/cli/test/ledger-commands.test.ts,
 * as another user.)
 */
import { assert, describe, it } from "@effect/vitest"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Context, Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Ledger, LedgerEvent, LedgerReader } from "../src/index.js"
import { tempDir } from "./support.js"

const reader = (filename: string) =>
  Effect.map(Layer.build(LedgerReader.layerSqlite({ filename })), (context) =>
    Context.get(context, LedgerReader.LedgerReader)
  )

describe("LedgerReader", () => {
  it.scoped(
    "reads a recorded ledger, writing nothing; refuses a missing file, a file that is no ledger and an older schema",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const filename = Path.join(dir, "ledger.db")
        const runId = yield* Effect.scoped(
          Effect.gen(function* () {
            const ledger = Context.get(yield* Layer.build(Ledger.layerSqlite({ filename })), Ledger.Ledger)
            const run = yield* ledger.beginRun({ label: "recorded" })
            run.record(LedgerEvent.itemSubmitted({ id: 0, prompt: "p" }))
            yield* ledger.remember({
              scope: { _tag: "Command", argv: ["git", "status"], exact: true },
              author: "alice"
            })
            return run.id
          })
        )
        const bytes = () => Fs.readFileSync(filename).toString("base64")
        const before = { bytes: bytes(), mtime: Fs.statSync(filename).mtimeMs }

        const read = yield* Effect.scoped(
          Effect.gen(function* () {
            const ledger = yield* reader(filename)
            return {
              runs: yield* ledger.runs(),
              items: yield* ledger.workItems(runId),
              rules: yield* ledger.rememberedRules()
            }
          })
        )
        assert.deepStrictEqual(
          read.runs.map((r) => [r.runId, r.status]),
          [[runId, "ended"]]
        )
        assert.deepStrictEqual(
          read.items.map((i) => i.prompt),
          ["p"]
        )
        assert.deepStrictEqual(
          read.rules.map((r) => r.author),
          ["alice"]
        )
        assert.deepStrictEqual(
          { bytes: bytes(), mtime: Fs.statSync(filename).mtimeMs },
          before,
          "the ledger is not written"
        )
        // In a directory it may write, SQLite leaves its (empty) -wal and its -shm index, as any reader of a WAL database does.
        assert.deepStrictEqual(
          Fs.readdirSync(dir).filter((f) => !["ledger.db", "ledger.db-wal", "ledger.db-shm"].includes(f)),
          []
        )
        assert.strictEqual(Fs.existsSync(`${filename}-wal`) ? Fs.statSync(`${filename}-wal`).size : 0, 0)

        const missing = yield* Effect.flip(Effect.scoped(reader(Path.join(dir, "none.db"))))
        assert.strictEqual(missing.reason, "NotFound")
        assert.isFalse(Fs.existsSync(Path.join(dir, "none.db")))

        // A SQLite file with no ledger schema, then one whose schema is older than this code's: never migrated here.
        const other = Path.join(dir, "other.db")
        yield* Effect.scoped(
          Effect.gen(function* () {
            const sql = yield* SqliteClient.make({ filename: other }).pipe(Effect.provide(Reactivity.layer))
            yield* sql`CREATE TABLE t (x integer)`
          })
        )
        const notLedger = yield* Effect.flip(Effect.scoped(reader(other)))
        assert.strictEqual(notLedger.reason, "Migration")
        assert.include(notLedger.detail, "not a ledger Warden can read")
        yield* Effect.scoped(
          Effect.gen(function* () {
            const sql = yield* SqliteClient.make({ filename: other }).pipe(Effect.provide(Reactivity.layer))
            yield* sql`CREATE TABLE ledger_migrations (migration_id integer PRIMARY KEY, created_at datetime, name varchar(255))`
            yield* sql`INSERT INTO ledger_migrations (migration_id, created_at, name) VALUES (1, 0, 'initial')`
          })
        )
        const older = yield* Effect.flip(Effect.scoped(reader(other)))
        assert.strictEqual(older.reason, "Migration")
        assert.include(
          older.detail,
          `its schema (version 1) is older than this Warden's (${LedgerReader.schemaVersion})`
        )
      })
  )
})
