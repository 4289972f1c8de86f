/**
 * The ledger's SQLite file: made private to its owner where missing, checked, in WAL mode, with no
 * busy timeout (another process's lock is waited for asynchronously, never on the event loop).
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { type Duration, Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Busy from "./Busy.js"
import * as Integrity from "./Integrity.js"
import { describeCause, LedgerError } from "./LedgerError.js"

const statOrUndefined = (path: string): Fs.Stats | undefined => {
  try {
    return Fs.statSync(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT" || code === "ENOTDIR") return undefined
    throw error
  }
}

/**
 * `mkdir -p` (mode 0700), one level at a time from the deepest directory that exists. Not Node's
 * recursive `mkdirSync`, which never returns where `mkdir` answers ENOENT under a parent that
 * exists (measured on Node 20 under `/proc`): here that is an error naming the directory.
 */
const makeDirectories = (dir: string): void => {
  const missing: Array<string> = []
  let at = dir
  let stat = statOrUndefined(at)
  while (stat === undefined) {
    missing.push(at)
    const parent = Path.dirname(at)
    if (parent === at) break
    at = parent
    stat = statOrUndefined(at)
  }
  if (stat !== undefined && !stat.isDirectory()) throw new Error(`${at} is not a directory`)
  for (const d of missing.reverse()) {
    try {
      Fs.mkdirSync(d, { mode: 0o700 })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || !Fs.statSync(d).isDirectory()) {
        throw new Error(
          `cannot make the directory ${d} (${(error as NodeJS.ErrnoException).code ?? String(error)}): not a place for files`
        )
      }
    }
  }
}

/**
 * Open (and make, where missing) the SQLite file `filename` for the ledger, in the caller's scope:
 * its directory mode 0700, the file 0600, `PRAGMA quick_check`, WAL with `synchronous = NORMAL`.
 * Fails with `LedgerError` (`Open` or `Corrupt`) as `Ledger.layerSqlite` documents.
 */
export const open = (
  filename: string,
  lockTimeout: Duration.DurationInput
): Effect.Effect<SqliteClient.SqliteClient, LedgerError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* Effect.try({
      try: () => {
        makeDirectories(Path.dirname(filename))
        const existing = statOrUndefined(filename)
        if (existing !== undefined && !existing.isFile()) throw new Error("it exists and is not a regular file")
        // Made here, private to its owner: SQLite gives the -wal and -shm files the same mode.
        Fs.closeSync(Fs.openSync(filename, "a", 0o600))
        if (!Fs.statSync(filename).isFile()) throw new Error("it is not a regular file")
      },
      catch: (cause) =>
        new LedgerError({ reason: "Open", detail: `cannot create ${filename}: ${describeCause(cause)}`, cause })
    })
    const openFailed = (cause: unknown) =>
      Integrity.isCorrupt(cause)
        ? Integrity.corrupt(filename, cause)
        : new LedgerError({ reason: "Open", detail: `cannot open ${filename}: ${describeCause(cause)}`, cause })
    // WAL is set below, not by the client: it may have to wait for another process's lock. A
    // statement that could not be prepared (the schema locked by another process) is remembered
    // as failed by the client's cache for its time to live: 1 s, so a later try prepares it again.
    const client = yield* SqliteClient.make({ filename, disableWAL: true, prepareCacheTTL: "1 second" }).pipe(
      Effect.provide(Reactivity.layer),
      // better-sqlite3 throws while opening (not a database, no permission): a failure, not a defect.
      Effect.catchAllDefect((cause) => openFailed(cause))
    )
    // An unprepared statement's prepare throws outside the client's error handling: a defect.
    const opening = <A, E>(effect: Effect.Effect<A, E>) =>
      effect.pipe(
        Effect.mapError(openFailed),
        Effect.catchAllDefect((cause) => Effect.fail(openFailed(cause)))
      )
    // No busy timeout: better-sqlite3 would wait for another process's lock synchronously, on the
    // event loop (5 s by default). A busy answer comes back at once and is waited for here, and in
    // the writer, asynchronously (`Busy.retry`, up to `lockTimeout`).
    yield* opening(client`PRAGMA busy_timeout = 0`.unprepared)
    yield* opening(Busy.retry(client`PRAGMA journal_mode = WAL`.unprepared, lockTimeout))
    // A damaged file is refused before anything reads or writes it (a quick check: every page's
    // structure, not the indexes' contents).
    yield* Integrity.quickCheck(client, filename, lockTimeout).pipe(
      Effect.catchTag("SqlError", (e) => Effect.fail(openFailed(e))),
      Effect.catchAllDefect((cause) => Effect.fail(openFailed(cause)))
    )
    // WAL with synchronous=NORMAL: a commit survives the process dying (SIGKILL, OOM) without an
    // fsync per transaction; a power cut may lose the last commits, never the file's consistency.
    yield* opening(client`PRAGMA synchronous = NORMAL`.unprepared)
    return client
  })
