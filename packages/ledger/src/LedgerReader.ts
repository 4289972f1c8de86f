/**
 * The ledger opened for reading only: what `warden audit`, `warden rules list` and `warden rules
 * test` need, on a ledger file the user may read but not write (another user's, a copy on a
 * read-only mount, a backup).
 *
 * It never creates a file, never migrates and never writes: the SQLite file is opened read-only,
 * and its schema must already be this version's (an older one is refused with what to do: open it
 * once with a command that may write it). A ledger in WAL mode needs its `-shm` index beside it;
 * where that cannot be made (a directory the user may not write) and no `-wal` file holds
 * uncommitted pages, the file is read from a private copy (made in a temporary directory, removed
 * when the scope closes), so reading never needs write access to the ledger's directory.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Context, Effect, Layer } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { LedgerShape } from "./Ledger.js"
import { describeCause, LedgerError } from "./internal/LedgerError.js"
import * as Integrity from "./internal/Integrity.js"
import * as Migrations from "./Migrations.js"
import * as Queries from "./internal/Queries.js"

/** What a read-only ledger offers: the audit, recovery and remembered-rule reads of `LedgerShape`. */
export interface LedgerReaderShape
  extends Pick<
    LedgerShape,
    | "runs"
    | "workItems"
    | "threads"
    | "turns"
    | "cards"
    | "lateDecisions"
    | "accounting"
    | "unfinishedItems"
    | "openCards"
    | "rememberedRules"
  > {}

/** The read-only ledger's tag, provided by `layerSqlite`. */
export class LedgerReader extends Context.Tag("@warden/ledger/LedgerReader")<LedgerReader, LedgerReaderShape>() {}

/** The schema version this code writes: the highest migration id it knows. */
export const schemaVersion: number = Math.max(...Object.keys(Migrations.migrations).map((k) => Number.parseInt(k, 10)))

/**
 * The reads on the `SqlClient` in context, once its schema is checked (never migrated). Fails with
 * `LedgerError` of reason `Migration` when the schema is older than this code's (or absent).
 */
export const make: Effect.Effect<LedgerReaderShape, LedgerError, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{
    readonly id: unknown
  }>`SELECT max(migration_id) AS id FROM ${sql(Migrations.MigrationsTable)}`.pipe(
    Effect.mapError(
      (cause) =>
        new LedgerError({
          reason: "Migration",
          detail: `not a ledger Warden can read (${describeCause(cause)})`,
          cause
        })
    )
  )
  const at = Number(rows[0]?.id ?? 0)
  if (!(at >= schemaVersion)) {
    return yield* new LedgerError({
      reason: "Migration",
      detail: `its schema (version ${at}) is older than this Warden's (${schemaVersion}) and is not brought up to date when it is only read: run a command that writes it (\`warden run\`) once as a user who may`
    })
  }
  const clock = yield* Effect.clock
  return Queries.reads(sql, () => clock.unsafeCurrentTimeMillis())
})

const errnoOf = (cause: unknown): string | undefined => (cause as NodeJS.ErrnoException | undefined)?.code

/** The file can be read as a ledger: it exists, is a regular file, and this user may read it. */
const checkReadable = (filename: string): Effect.Effect<void, LedgerError> =>
  Effect.try({
    try: () => {
      const stat = Fs.statSync(filename)
      if (!stat.isFile()) throw Object.assign(new Error("it exists and is not a regular file"), { code: "ENOTFILE" })
      Fs.accessSync(filename, Fs.constants.R_OK)
    },
    catch: (cause) => {
      const code = errnoOf(cause)
      if (code === "ENOENT" || code === "ENOTDIR")
        return new LedgerError({ reason: "NotFound", detail: `no ledger at ${filename}`, cause })
      if (code === "EACCES" || code === "EPERM") {
        return new LedgerError({
          reason: "Permission",
          detail: `permission denied: you may not read ${filename}`,
          cause
        })
      }
      return new LedgerError({ reason: "Open", detail: `cannot read ${filename}: ${describeCause(cause)}`, cause })
    }
  })

/** A read-only SQLite client on `filename`, its schema checked by a first query (so a failed open shows here). */
const openReadOnly = (filename: string): Effect.Effect<SqliteClient.SqliteClient, LedgerError, Scope.Scope> =>
  Effect.gen(function* () {
    const client = yield* SqliteClient.make({ filename, readonly: true, disableWAL: true }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllDefect(
        (cause) =>
          new LedgerError({ reason: "Open", detail: `cannot open ${filename}: ${describeCause(cause)}`, cause })
      )
    )
    const readFailed = (cause: unknown) =>
      Integrity.isCorrupt(cause)
        ? Integrity.corrupt(filename, cause)
        : new LedgerError({ reason: "Open", detail: `cannot read ${filename}: ${describeCause(cause)}`, cause })
    // The first read opens the WAL index (`-shm`): where it cannot be made, this fails.
    yield* client`SELECT count(*) AS n FROM sqlite_master`.pipe(Effect.mapError(readFailed))
    // A damaged file is refused as `warden run` refuses it (Ledger.layerSqlite).
    yield* Integrity.quickCheck(client, filename, "0 millis").pipe(
      Effect.catchTag("SqlError", (e) => Effect.fail(readFailed(e))),
      Effect.catchAllDefect((cause) => Effect.fail(readFailed(cause)))
    )
    return client
  })

const exists = (path: string): boolean => {
  try {
    return Fs.statSync(path).size > 0
  } catch {
    return false
  }
}

/**
 * A private copy of the ledger (with its `-wal`, if any) in a new temporary directory (mode 0700),
 * removed when the scope closes: read where the ledger's own directory allows no `-shm` file.
 */
const privateCopy = (filename: string): Effect.Effect<string, LedgerError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-ledger-read-"))
        const copy = Path.join(dir, "ledger.db")
        try {
          Fs.copyFileSync(filename, copy)
          if (exists(`${filename}-wal`)) Fs.copyFileSync(`${filename}-wal`, `${copy}-wal`)
        } catch (error) {
          Fs.rmSync(dir, { recursive: true, force: true })
          throw error
        }
        return copy
      },
      catch: (cause) =>
        errnoOf(cause) === "EACCES"
          ? new LedgerError({
              reason: "Permission",
              detail: `permission denied: you may not read ${filename} (or its -wal file)`,
              cause
            })
          : new LedgerError({ reason: "Open", detail: `cannot read ${filename}: ${describeCause(cause)}`, cause })
    }),
    (copy) => Effect.sync(() => Fs.rmSync(Path.dirname(copy), { recursive: true, force: true }))
  )

/**
 * The ledger in a SQLite file, read-only: never created, migrated or written (see the module
 * comment). Building it fails with `LedgerError`: `NotFound` when there is no file, `Permission`
 * when this user may not read it, `Open` when it is not a regular file or not a SQLite database,
 * `Corrupt` when `PRAGMA quick_check` finds it damaged,
 * `Migration` when its schema is not this version's.
 *
 * @example
 * ```ts
 * import { LedgerReader } from "@warden/ledger"
 * import { Effect } from "effect"
 *
 * const open = Effect.gen(function*() {
 *   const ledger = yield* LedgerReader.LedgerReader
 *   return yield* ledger.cards({ outcome: "declined" })
 * }).pipe(Effect.provide(LedgerReader.layerSqlite({ filename: "/var/lib/warden/ledger.db" })))
 * ```
 */
export const layerSqlite = (options: { readonly filename: string }): Layer.Layer<LedgerReader, LedgerError> =>
  Layer.scoped(
    LedgerReader,
    Effect.gen(function* () {
      const filename = Path.resolve(options.filename)
      yield* checkReadable(filename)
      // In place; else (no -shm index can be made beside it) from a private copy.
      const client = yield* openReadOnly(filename).pipe(
        Effect.catchIf(
          (e) => e.reason !== "Corrupt",
          () =>
            Effect.flatMap(privateCopy(filename), (copy) =>
              openReadOnly(copy).pipe(
                Effect.mapError(
                  (e) =>
                    new LedgerError({ reason: e.reason, detail: e.detail.replaceAll(copy, filename), cause: e.cause })
                )
              )
            )
        )
      )
      return yield* make.pipe(Effect.provideService(SqlClient.SqlClient, client))
    })
  )
