/**
 * The answer journal's file, mapped (the native module `native/journal.c`, built by `pnpm install`)
 * and appended (`write(2)`): the same lines in the file, whatever happened to the process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Ledger } from "../src/index.js"
import * as AnswerJournal from "../src/internal/AnswerJournal.js"
import * as JournalFile from "../src/internal/JournalFile.js"
import { journalText, tempDir } from "./support.js"

const native = JournalFile.loadNative()
const here = Path.dirname(fileURLToPath(import.meta.url))
const journalModule = Path.join(here, "..", "src", "internal", "JournalFile.ts")

/** A line as the journal writes them (JSON, one per answer), `i`-th, `pad` characters of text. */
const line = (i: number, text = "") => `${JSON.stringify({ cardId: `card_${i}`, text })}\n`

/** `f` with WARDEN_JOURNAL_NATIVE set to `value` (restored after). */
const withNative = <A>(value: string, f: () => A): A => {
  const before = process.env["WARDEN_JOURNAL_NATIVE"]
  process.env["WARDEN_JOURNAL_NATIVE"] = value
  try {
    return f()
  } finally {
    if (before === undefined) delete process.env["WARDEN_JOURNAL_NATIVE"]
    else process.env["WARDEN_JOURNAL_NATIVE"] = before
  }
}

describe("JournalFile", () => {
  it("the native module is built and loads (pnpm install builds it; without it every test of a mapped file here fails)", () => {
    assert.isDefined(native, "node packages/ledger/native/build.mjs")
    assert.isFunction(native?.map)
  })

  for (const kind of ["mapped", "appended"] as const)
    it.scoped(`${kind}: the lines, in order, whole, and nothing else once the zeros are cut off`, () =>
      Effect.gen(function* () {
        const file = Path.join(yield* tempDir, "run.jsonl")
        const journal = JournalFile.open(file, kind === "mapped" ? native : undefined)
        assert.strictEqual(journal.mapped, kind === "mapped")
        // Past the first mapping (1.25 MiB): the mapped file grows, nothing is lost at the seam;
        // some lines not ASCII (the cursor counts bytes, a line's length is in UTF-16 units).
        const lines: Array<string> = []
        let bytes = 0
        for (let i = 0; bytes < JournalFile.MappedBytes + 200_000; i++) {
          const l = line(i, i % 7 === 0 ? "é€😀".repeat(40) : "x".repeat(i % 300))
          lines.push(l)
          journal.append(Buffer.from(l))
          bytes += Buffer.byteLength(l)
        }
        journal.close()
        assert.strictEqual(journalText(file), lines.join(""))
        const size = Fs.statSync(file).size
        if (kind === "mapped") assert.isAbove(size, JournalFile.MappedBytes, "grown")
        else assert.strictEqual(size, bytes)
      })
    )

  it.scoped("mapped: an existing file is continued after its last line, a line cut short is ended first", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      // A mapped file with two lines (zeros after them), reopened: the third follows the second.
      const file = Path.join(dir, "a.jsonl")
      const first = JournalFile.open(file, native)
      first.append(Buffer.from(line(1)))
      first.append(Buffer.from(line(2)))
      first.close()
      const again = JournalFile.open(file, native)
      again.append(Buffer.from(line(3)))
      again.close()
      assert.strictEqual(journalText(file), line(1) + line(2) + line(3))
      // A file whose last line a crash cut short: the next line is not glued to it.
      const cut = Path.join(dir, "b.jsonl")
      Fs.writeFileSync(cut, `${line(1)}{"cardId":"car`)
      const after = JournalFile.open(cut, native)
      after.append(Buffer.from(line(2)))
      after.close()
      assert.deepStrictEqual(journalText(cut).split("\n"), [line(1).trim(), '{"cardId":"car', line(2).trim(), ""])
    })
  )

  it.scoped("mapped: a map that fails (a file system that cannot allocate) falls back to appending", () =>
    Effect.gen(function* () {
      const file = Path.join(yield* tempDir, "run.jsonl")
      Fs.writeFileSync(file, line(0))
      // As `posix_fallocate` then a failing `mmap` would: the file lengthened, then an error.
      const failing: JournalFile.Native = {
        map: (fd, length) => {
          Fs.ftruncateSync(fd, length)
          throw new Error("EMMAP")
        },
        unmap: () => {}
      }
      const journal = JournalFile.open(file, failing)
      assert.isFalse(journal.mapped)
      journal.append(Buffer.from(line(1)))
      journal.close()
      // Cut back to its lines first: the appended line follows the last one, no zeros between.
      assert.strictEqual(Fs.readFileSync(file, "utf8"), line(0) + line(1))
    })
  )

  it.scoped("mapped: closed, the file is unmapped at once (a replaced file's blocks go with its last descriptor)", () =>
    Effect.gen(function* () {
      const file = Path.join(yield* tempDir, "run.jsonl")
      const mappedNow = () => Fs.readFileSync("/proc/self/maps", "utf8").includes(file)
      const journal = JournalFile.open(file, native)
      journal.append(Buffer.from(line(1)))
      assert.isTrue(mappedNow(), "mapped while open")
      journal.closeOffThread()
      assert.isFalse(mappedNow(), "unmapped when closed, not at the next collection")
      assert.strictEqual(journalText(file), line(1))
    })
  )

  it.scoped("mapped: reopened, a file keeps its size (the zeros of its mapping are not lines to double)", () =>
    Effect.gen(function* () {
      const file = Path.join(yield* tempDir, "run.jsonl")
      for (let i = 0; i < 4; i++) {
        const journal = JournalFile.open(file, native)
        journal.append(Buffer.from(line(i)))
        journal.close()
      }
      assert.strictEqual(Fs.statSync(file).size, JournalFile.MappedBytes)
      assert.strictEqual(journalText(file), line(0) + line(1) + line(2) + line(3))
    })
  )

  it.scoped("mapped: a growth that fails (a full disk) goes on with pwrite(2) after the last line: nothing lost", () =>
    Effect.gen(function* () {
      const file = Path.join(yield* tempDir, "run.jsonl")
      let maps = 0
      const once: JournalFile.Native = {
        map: (fd, length) => {
          if (++maps > 1) throw new Error("ENOSPC")
          return native!.map(fd, length)
        },
        unmap: (buffer) => native!.unmap(buffer)
      }
      const journal = JournalFile.open(file, once)
      assert.isTrue(journal.mapped)
      const lines: Array<string> = []
      let bytes = 0
      for (let i = 0; bytes < JournalFile.MappedBytes + 50_000; i++) {
        const l = line(i, "y".repeat(200))
        lines.push(l)
        journal.append(Buffer.from(l))
        bytes += Buffer.byteLength(l)
      }
      journal.close()
      assert.strictEqual(maps, 2, "one growth tried")
      assert.strictEqual(journalText(file), lines.join(""))
    })
  )

  it.scoped("a module WARDEN_JOURNAL_NATIVE names that is not there: the journal says so once, and appends", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const warned: Array<string> = []
      withNative(Path.join(dir, "no-such.node"), () =>
        AnswerJournal.make(Path.join(dir, "answers"), (m) => warned.push(m)).close()
      )
      assert.deepStrictEqual(warned, [
        `WARDEN_JOURNAL_NATIVE names ${Path.join(dir, "no-such.node")}, which is not there: the answer journal appends with write(2)`
      ])
    })
  )

  it.scoped(
    "answerJournalMode: mapped on ext4 and tmpfs with the module; write(2) and why elsewhere, without it, or off",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const moduleFile = Path.join(here, "..", "build", "warden-journal.node")
        const mode = (filename: string) => withNative(moduleFile, () => Ledger.answerJournalMode({ filename }))
        // Not made yet (the ledger makes its directory): the nearest directory above it that exists.
        const onDisk = mode(Path.join(dir, "state", "deeper", "ledger.db"))
        // The suite's temporary directories are on one of the mapped file systems (ext4 here).
        const fileSystem = ({ 61267: "ext4", 1481003842: "xfs", 16914836: "tmpfs" } as Record<number, string>)[
          Number(Fs.statfsSync(dir).type)
        ]
        assert.isDefined(fileSystem, "the temporary directory is on ext4, xfs or tmpfs")
        assert.deepStrictEqual(onDisk, {
          mode: "mapped",
          module: moduleFile,
          fileSystem,
          reason: `the module loads and ${dir} is on ${fileSystem}`
        })
        if (Fs.existsSync("/dev/shm"))
          assert.deepInclude(mode("/dev/shm/warden-doctor-probe/ledger.db"), { mode: "mapped", fileSystem: "tmpfs" })
        // A file system that is not mapped (proc stands for btrfs, NFS, overlays: none here).
        assert.deepStrictEqual(mode("/proc/self/ledger.db"), {
          mode: "write(2)",
          module: moduleFile,
          fileSystem: "0x9fa0",
          reason: "/proc/self is on 0x9fa0, not ext4, xfs or tmpfs"
        })
        // No module: off, or one named that is not there (said as the ledger warns it).
        assert.deepStrictEqual(
          withNative("off", () => Ledger.answerJournalMode({ filename: Path.join(dir, "ledger.db") })),
          { mode: "write(2)", module: undefined, fileSystem, reason: "WARDEN_JOURNAL_NATIVE=off" }
        )
        const missing = Path.join(dir, "no-such.node")
        assert.strictEqual(
          withNative(missing, () => Ledger.answerJournalMode({ filename: Path.join(dir, "ledger.db") }))?.reason,
          `WARDEN_JOURNAL_NATIVE names ${missing}, which is not there: the answer journal appends with write(2)`
        )
        // Another directory named for the journal is the one looked at; none when the journal is off.
        assert.deepInclude(
          withNative(moduleFile, () =>
            Ledger.answerJournalMode({ filename: "/proc/self/ledger.db", answerJournal: dir })
          ),
          { mode: "mapped" }
        )
        assert.isUndefined(Ledger.answerJournalMode({ filename: Path.join(dir, "ledger.db"), answerJournal: false }))
      })
  )

  it("the reader: zeros after the lines cut off, a run of zeros inside read as a line's end", () => {
    const zeros = (n: number) => "\0".repeat(n)
    assert.strictEqual(JournalFile.contentOf(line(1) + zeros(5000)), line(1))
    assert.strictEqual(JournalFile.contentOf(line(1) + line(2)), line(1) + line(2))
    assert.strictEqual(JournalFile.contentOf(""), "")
    assert.strictEqual(JournalFile.contentOf(zeros(10)), "")
    // Lines appended after a mapped file's zeros, and a line cut short before them: every whole
    // line stays one line, the cut one stays apart from the next.
    assert.strictEqual(
      JournalFile.contentOf(`${line(1)}{"cardId":"ca${zeros(300_000)}${line(2)}${zeros(7)}${line(3)}${zeros(100)}`),
      `${line(1)}{"cardId":"ca\n${line(2)}\n${line(3)}`
    )
  })

  // What the journal is for: a line stored in the mapping is in the file after the process is
  // killed the next instant (the page cache has it; no write(2), no sync, no exit handler).
  it.scoped("mapped: a line stored just before a SIGKILL is in the file", () =>
    Effect.gen(function* () {
      const file = Path.join(yield* tempDir, "run.jsonl")
      const code = `
        import * as JournalFile from ${JSON.stringify(journalModule)}
        const journal = JournalFile.open(${JSON.stringify(file)}, JournalFile.loadNative())
        if (!journal.mapped) { console.log("not mapped"); process.exit(3) }
        for (let i = 0; i < 100; i++) journal.append(Buffer.from(${JSON.stringify(line(0))}.replace("card_0", "card_" + i)))
        process.kill(process.pid, "SIGKILL")
      `
      const result = yield* Effect.sync(() =>
        ChildProcess.spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
          cwd: Path.join(here, ".."),
          encoding: "utf8",
          env: { ...process.env, WARDEN_JOURNAL_NATIVE: "" }
        })
      )
      assert.strictEqual(result.signal, "SIGKILL", result.stdout + result.stderr)
      const lines = journalText(file).trimEnd().split("\n")
      assert.strictEqual(lines.length, 100)
      assert.strictEqual(lines[99], line(99).trim())
    })
  )
})
