/**
 * A thread's durable state, so that an item survives the loss of its host: what codex needs to
 * resume a thread in another codex home, kept in the fleet's store as the item's turns complete.
 *
 * Measured on codex 0.171.0: `thread/resume` in a codex home that never saw the thread works, with
 * the whole history (the model's next request holds the earlier turns), once the thread's rollout
 * file is there at the same path under the codex home:
 * `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, one JSON line per event. Nothing else of
 * the codex home is needed (its SQLite state and history files are not read by the resume). A
 * first turn with a short exchange is ~40 KB (the base instructions and the world state are most
 * of it); every turn adds its items, command outputs included.
 *
 * The snapshot is cut right after the `task_complete` line of the turn it covers: a rollout read
 * while the next turn has begun would otherwise hold that turn's first lines, and the turn would
 * be asked twice after a move. codex writes the rollout asynchronously, so the snapshot waits
 * (bounded) for that line. It is stored gzipped with the SHA-256 of the cut text, checked before
 * it is written into the new owner's codex home.
 *
 * What it holds is the conversation itself: prompts, the model's answers, command outputs. It is
 * as sensitive as the codex home it comes from, and is stored unmasked (a masked rollout would not
 * resume): docs/scaling.md says so, and `Runner.layer({ threadState: false })` keeps it out of the
 * store.
 *
 * @internal
 */
import { Data, Duration, Effect, Schedule } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { promisify } from "node:util"

const gzip = promisify(Zlib.gzip)
const gunzip = promisify(Zlib.gunzip)

/** The largest rollout (its cut text, uncompressed) kept in the store: 32 MiB. */
export const MaxBytes = 32 * 1024 * 1024

/** How long a snapshot waits for codex to write the turn's `task_complete` line. */
export const FlushWait = Duration.seconds(10)

/** A thread's state as stored: where its rollout goes under a codex home, and the rollout. */
export interface Snapshot {
  readonly threadId: string
  /** Relative to the codex home, under `sessions/`. */
  readonly path: string
  /** The rollout's cut text, in bytes. */
  readonly bytes: number
  /** Hex SHA-256 of the cut text. */
  readonly sha256: string
  /** The cut text, gzipped, base64. */
  readonly content: string
}

/** Why a thread's state could not be taken or restored. */
export class ThreadStateError extends Data.TaggedError("ThreadStateError")<{
  readonly reason: "NotFound" | "NotFlushed" | "TooLarge" | "Corrupt" | "BadPath" | "Io"
  readonly detail: string
}> {
  override get message() {
    return this.detail
  }
}

const io = (detail: string) => (cause: unknown) =>
  new ThreadStateError({
    reason: "Io",
    detail: `${detail}: ${(cause as NodeJS.ErrnoException)?.code ?? String(cause)}`
  })

/** A path under `sessions/` with no way out of the codex home. */
const isRolloutPath = (path: string): boolean =>
  /^sessions\/[A-Za-z0-9._\-/]+\.jsonl$/.test(path) && !path.split("/").some((part) => part === ".." || part === "")

/**
 * The rollout of `threadId` under `codexHome`, relative to it, found by its file name
 * (`rollout-…-<thread id>.jsonl` anywhere under `sessions/`).
 */
export const find = (codexHome: string, threadId: string): Effect.Effect<string, ThreadStateError> =>
  Effect.tryPromise({
    try: async () => {
      const suffix = `-${threadId}.jsonl`
      const walk = async (dir: string): Promise<string | undefined> => {
        let entries: Array<Fs.Dirent>
        try {
          entries = await Fs.promises.readdir(dir, { withFileTypes: true })
        } catch {
          return undefined
        }
        for (const entry of entries) {
          const full = Path.join(dir, entry.name)
          if (entry.isDirectory()) {
            const found = await walk(full)
            if (found !== undefined) return found
          } else if (entry.isFile() && entry.name.startsWith("rollout-") && entry.name.endsWith(suffix)) {
            return full
          }
        }
        return undefined
      }
      return await walk(Path.join(codexHome, "sessions"))
    },
    catch: io(`reading ${codexHome}/sessions`)
  }).pipe(
    Effect.flatMap((full) =>
      full === undefined
        ? Effect.fail(
            new ThreadStateError({
              reason: "NotFound",
              detail: `no rollout of thread ${threadId} under ${codexHome}/sessions`
            })
          )
        : Effect.succeed(Path.relative(codexHome, full).split(Path.sep).join("/"))
    )
  )

/**
 * The text of `rollout` up to and including the line that says turn `turnId` completed, or
 * undefined while codex has not written that line (whole) yet.
 */
export const cutAfterTurn = (rollout: Buffer, turnId: string): Buffer | undefined => {
  const marker = Buffer.from(`"turn_id":"${turnId}"`)
  let at = rollout.lastIndexOf(marker)
  while (at >= 0) {
    const start = rollout.lastIndexOf(0x0a, at) + 1
    const end = rollout.indexOf(0x0a, at)
    if (end < 0) return undefined
    const line = rollout.subarray(start, end).toString("utf8")
    if (line.includes('"type":"task_complete"')) return rollout.subarray(0, end + 1)
    at = start === 0 ? -1 : rollout.lastIndexOf(marker, start - 1)
  }
  return undefined
}

const sha256 = (data: Buffer) => Crypto.createHash("sha256").update(data).digest("hex")

/**
 * The thread's state once turn `turnId` completed: its rollout cut after that turn, waiting (up to
 * `FlushWait`) for codex to write the turn's end. `path` is where the rollout is, when known.
 */
export const capture = (options: {
  readonly codexHome: string
  readonly threadId: string
  readonly turnId: string
  readonly path?: string | undefined
  readonly maxBytes?: number
}): Effect.Effect<Snapshot, ThreadStateError> =>
  Effect.gen(function* () {
    const { codexHome, threadId, turnId } = options
    const maxBytes = options.maxBytes ?? MaxBytes
    const path = options.path ?? (yield* find(codexHome, threadId))
    const readCut = Effect.tryPromise({
      try: () => Fs.promises.readFile(Path.join(codexHome, path)),
      catch: io(`reading the rollout ${path}`)
    }).pipe(
      Effect.flatMap((rollout) => {
        const cut = cutAfterTurn(rollout, turnId)
        return cut === undefined
          ? Effect.fail(
              new ThreadStateError({
                reason: "NotFlushed",
                detail: `the rollout ${path} does not say yet that turn ${turnId} completed`
              })
            )
          : Effect.succeed(cut)
      })
    )
    const cut = yield* readCut.pipe(
      Effect.retry({
        while: (e) => e.reason === "NotFlushed",
        schedule: Schedule.spaced("100 millis").pipe(Schedule.upTo(FlushWait))
      })
    )
    if (cut.length > maxBytes) {
      return yield* new ThreadStateError({
        reason: "TooLarge",
        detail: `the rollout of thread ${threadId} is ${cut.length} bytes, over the ${maxBytes} kept in the store`
      })
    }
    const zipped = yield* Effect.tryPromise({ try: () => gzip(cut), catch: io("compressing the rollout") })
    return { threadId, path, bytes: cut.length, sha256: sha256(cut), content: zipped.toString("base64") }
  })

/**
 * Write `snapshot` into `codexHome` (directories mode 0700, the file 0600, replaced whole), after
 * checking its path stays under `sessions/` and its text is what was stored (size and SHA-256).
 */
export const restore = (codexHome: string, snapshot: Snapshot): Effect.Effect<void, ThreadStateError> =>
  Effect.gen(function* () {
    if (!isRolloutPath(snapshot.path)) {
      return yield* new ThreadStateError({
        reason: "BadPath",
        detail: `the stored rollout path ${JSON.stringify(snapshot.path).slice(0, 200)} is not under sessions/`
      })
    }
    const text = yield* Effect.tryPromise({
      try: () => gunzip(Buffer.from(snapshot.content, "base64")),
      catch: () =>
        new ThreadStateError({
          reason: "Corrupt",
          detail: `the stored rollout of thread ${snapshot.threadId} does not unzip`
        })
    })
    if (text.length !== snapshot.bytes || sha256(text) !== snapshot.sha256) {
      return yield* new ThreadStateError({
        reason: "Corrupt",
        detail: `the stored rollout of thread ${snapshot.threadId} does not match its checksum`
      })
    }
    const target = Path.join(codexHome, snapshot.path)
    const temp = `${target}.${process.pid}.${Crypto.randomBytes(4).toString("hex")}.tmp`
    yield* Effect.tryPromise({
      try: async () => {
        await Fs.promises.mkdir(Path.dirname(target), { recursive: true, mode: 0o700 })
        await Fs.promises.writeFile(temp, text, { mode: 0o600 })
        await Fs.promises.rename(temp, target)
      },
      catch: io(`writing the rollout into ${codexHome}`)
    }).pipe(Effect.tapError(() => Effect.promise(() => Fs.promises.rm(temp, { force: true }))))
  })
