/**
 * How a run's answer journal file is appended to (`AnswerJournal`): one record per answer (bytes
 * that end with a newline: `AnswerJournal`'s records, or any lines), in the synchronous step that
 * writes the answer, before it.
 *
 * - **Mapped**, when the native module is there (`native/journal.c`, built by `pnpm install` on
 *   Linux with a C compiler: `native/build.mjs`): the file's first bytes are allocated on disk
 *   (`posix_fallocate`) and mapped shared; a record is a copy into the mapping, in the page cache
 *   at once, as a `write(2)` would have put it. ~0.5 µs where the `write(2)` took 2-3 µs
 *   on a busy loop and 7-12 µs after the loop had been idle a millisecond (docs/performance.md,
 *   eighth pass). The file is longer than its records: the bytes after them are zeros, which a reader
 *   skips (`AnswerJournal.entriesOf`; `contentOf` for lines). The pages ahead of the cursor are touched after the step (a page's first
 *   store costs a fault), never in it.
 * - **Appended** (`write(2)` on a descriptor opened for appending) otherwise, or when mapping
 *   fails (a file system that cannot allocate, a full disk): the same records, the same guarantee.
 *
 * Either way nothing is synced: a record outlives the process (SIGKILL included), not the machine,
 * as the ledger's WAL commits at `synchronous = NORMAL` do.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { besideModule } from "./Beside.js"

/** The native module's one function (`native/journal.c`). */
export interface Native {
  /**
   * Allocate the file's first `length` bytes on disk and map them shared, read-write. Throws if it
   * cannot, or if the file system is not one that overwrites an allocated block in place (ext4,
   * xfs, tmpfs).
   */
  readonly map: (fd: number, length: number) => ArrayBuffer
  /** Unmap a buffer `map` returned, at once, and detach it (its views read and write nothing after). */
  readonly unmap: (buffer: ArrayBuffer) => void
}

export interface JournalFile {
  /**
   * Append one record (its bytes end with "\n", so that a file reopened after a record cut short
   * is continued on a new line). Throws if it cannot be written; `record` is not kept.
   */
  readonly append: (record: Uint8Array) => void
  /** Close the descriptor (a mapping goes when it is collected; what was stored stays in the file). */
  readonly close: () => void
  /** The same, the descriptor closed on libuv's pool (the last one of a replaced file frees its blocks: costly). */
  readonly closeOffThread: () => void
  readonly mapped: boolean
}

/**
 * The lines of a file of text lines appended here (an earlier version's journal: JSON lines): a
 * mapped file's zeros after its lines cut off, and a run of zeros inside (lines appended after a
 * mapping, a line a crash cut short before them) read as one line's end, so the lines after it
 * stay whole. No line holds a zero byte (JSON escapes it).
 * Linear: no regular expression (a long run of zeros would make one quadratic).
 */
export const contentOf = (text: string): string => {
  let end = text.length
  while (end > 0 && text.charCodeAt(end - 1) === 0) end--
  let out = ""
  let at = 0
  for (let zero = text.indexOf("\0"); zero !== -1 && zero < end; zero = text.indexOf("\0", at)) {
    out += `${text.slice(at, zero)}\n`
    at = zero
    while (at < end && text.charCodeAt(at) === 0) at++
  }
  return at === 0 ? text.slice(0, end) : out + text.slice(at, end)
}

const ModuleName = "warden-journal.node"

/**
 * The native module, if it can be loaded: `WARDEN_JOURNAL_NATIVE` in the environment (a path, or
 * `off`), else `warden-journal.node` beside the running module (the CLI's bundle, the built
 * package's `dist/internal/`), else `build/warden-journal.node` of the package (the sources, after
 * `pnpm install`). A module that is missing or will not load (another platform's) is no error:
 * the journal appends with `write(2)`.
 */
export const loadNative = (): Native | undefined => loaded().native

/** What `loadNative` found, by the value of `WARDEN_JOURNAL_NATIVE` (a module is loaded once). */
const found = new Map<string, Loaded>()

interface Loaded {
  readonly native: Native | undefined
  /** The module's file, when one loaded. */
  readonly file: string | undefined
}

const loaded = (): Loaded => {
  const named = process.env["WARDEN_JOURNAL_NATIVE"] ?? ""
  const known = found.get(named)
  if (known !== undefined) return known
  const result = load(named)
  found.set(named, result)
  return result
}

const load = (named: string): Loaded => {
  const candidates: Array<string> = []
  if (named !== "") {
    if (named === "off") return { native: undefined, file: undefined }
    candidates.push(Path.resolve(named))
  } else candidates.push(...besideModule([`./${ModuleName}`, `../../build/${ModuleName}`]))
  for (const file of candidates) {
    if (!Fs.existsSync(file)) continue
    try {
      const module = { exports: {} as Partial<Native> }
      process.dlopen(module, file)
      if (typeof module.exports.map === "function" && typeof module.exports.unmap === "function")
        return { native: module.exports as Native, file }
    } catch {
      // another platform's build, or a broken one: the journal appends with write(2)
    }
  }
  return { native: undefined, file: undefined }
}

/**
 * The file systems a journal file is mapped on (`statfs`'s `f_type`, as `native/journal.c`
 * checks): those that overwrite an allocated block in place.
 */
const MappedFileSystems: ReadonlyMap<number, string> = new Map([
  [0xef53, "ext4"],
  [0x58465342, "xfs"],
  [0x01021994, "tmpfs"]
])

/** How the journal writes its records in a directory, and why (`Ledger.answerJournalMode`). */
export interface Mode {
  readonly mode: "mapped" | "write(2)"
  /** The native module's file, when one loads. */
  readonly module: string | undefined
  /** The directory's file system, by name where it is one of the mapped ones, else its `statfs` type in hex. */
  readonly fileSystem: string | undefined
  /** One sentence: what decides the mode. */
  readonly reason: string
}

/**
 * How records would be written to a journal in `directory` (or the nearest directory above it that
 * exists: the journal's is made when the first answer is): mapped when the module loads and the
 * file system is one of the mapped ones. A file whose allocation or mapping fails at open still
 * falls back to `write(2)`; this does not try one.
 */
export const modeFor = (directory: string): Mode => {
  const { file } = loaded()
  const named = process.env["WARDEN_JOURNAL_NATIVE"] ?? ""
  let at = Path.resolve(directory)
  while (!Fs.existsSync(at) && Path.dirname(at) !== at) at = Path.dirname(at)
  let type: number | undefined
  try {
    type = Number(Fs.statfsSync(at).type)
  } catch {
    type = undefined
  }
  const fileSystem = type === undefined ? undefined : (MappedFileSystems.get(type) ?? `0x${type.toString(16)}`)
  if (file === undefined) {
    const reason =
      named === "off"
        ? "WARDEN_JOURNAL_NATIVE=off"
        : (namedButNotLoaded() ??
          `no native module (${ModuleName}) for ${process.platform}-${process.arch} beside Warden's modules: it is built by \`pnpm install\` on Linux with a C compiler`)
    return { mode: "write(2)", module: undefined, fileSystem, reason }
  }
  if (type === undefined || !MappedFileSystems.has(type))
    return {
      mode: "write(2)",
      module: file,
      fileSystem,
      reason: `${at} is on ${fileSystem ?? "a file system that cannot be read"}, not ext4, xfs or tmpfs`
    }
  return { mode: "mapped", module: file, fileSystem, reason: `the module loads and ${at} is on ${fileSystem}` }
}

/**
 * Why the module `WARDEN_JOURNAL_NATIVE` names is not used, if it names one that does not load (a
 * module found, or not, where it is looked for by default says nothing: `write(2)` is the plain way).
 */
export const namedButNotLoaded = (): string | undefined => {
  const named = process.env["WARDEN_JOURNAL_NATIVE"] ?? ""
  if (named === "" || named === "off" || loadNative() !== undefined) return undefined
  return `WARDEN_JOURNAL_NATIVE names ${Path.resolve(named)}, which ${Fs.existsSync(Path.resolve(named)) ? "does not load" : "is not there"}: the answer journal appends with write(2)`
}

const Page = 4096
/** What a mapped file is allocated and mapped with at first: a journal is replaced at 1 MiB (`AnswerJournal.CutAt`). */
export const MappedBytes = 1024 * 1024 + 256 * 1024
/** How far ahead of the cursor pages are touched, after the step that wrote. */
const TouchAhead = 16 * Page

const roundUp = (n: number): number => Math.ceil(n / Page) * Page

/**
 * Where the records of the file open on `fd` end (its first `size` bytes read back, from the end,
 * past the zeros an earlier mapping left): read with `read(2)`, not through a mapping, whose every
 * page read would be a fault in the answer's step.
 */
const linesEnd = (fd: number, size: number): { readonly end: number; readonly lastByte: number } => {
  const chunk = Buffer.allocUnsafe(64 * 1024)
  for (let to = size; to > 0; ) {
    const from = Math.max(0, to - chunk.length)
    const n = Fs.readSync(fd, chunk, 0, to - from, from)
    let i = n
    while (i > 0 && chunk[i - 1] === 0) i--
    if (i > 0) return { end: from + i, lastByte: chunk[i - 1]! }
    to = from
  }
  return { end: 0, lastByte: 10 }
}

/** Open `file` (created 0600 if missing) for appending: mapped when `native` is given and mapping succeeds. */
export const open = (file: string, native: Native | undefined): JournalFile => {
  if (native !== undefined) {
    const fd = Fs.openSync(file, Fs.constants.O_RDWR | Fs.constants.O_CREAT, 0o600)
    let size: number | undefined
    try {
      size = Fs.fstatSync(fd).size
      return mapped(fd, size, native)
    } catch {
      // The allocation may have lengthened the file before the mapping failed: the records appended
      // next follow the last one, not a run of zeros.
      try {
        if (size !== undefined) Fs.ftruncateSync(fd, linesEnd(fd, size).end)
      } catch {
        // the reader reads past zeros all the same (contentOf)
      }
      Fs.closeSync(fd)
    }
  }
  const fd = Fs.openSync(file, "a", 0o600)
  return {
    mapped: false,
    append: (record) => {
      Fs.writeSync(fd, record)
    },
    close: () => Fs.closeSync(fd),
    closeOffThread: () => Fs.close(fd, () => {})
  }
}

const mapped = (fd: number, size: number, native: Native): JournalFile => {
  const found = linesEnd(fd, size)
  let capacity = Math.max(MappedBytes, roundUp(found.end * 2))
  let buffer = native.map(fd, capacity)
  let bytes = new Uint8Array(buffer)
  let cursor = found.end
  // A record cut short (a crash while it was stored) is ended with a newline, as a line would be
  // (the records' reader skips it; a reader of lines would otherwise join it to the next).
  if (cursor > 0 && found.lastByte !== 10) bytes[cursor++] = 10
  /** Past a growth that failed: the records are written at the cursor with `pwrite(2)`. */
  let written = false
  let touchedTo = roundUp(cursor + 1)
  let touchScheduled = true
  let closed = false
  const touch = () => {
    touchScheduled = false
    if (closed || written) return
    // Only pages past the cursor (all zeros there): a store of 0 changes no byte of the file.
    const to = Math.min(capacity, roundUp(cursor + 1) + TouchAhead)
    for (let at = Math.max(touchedTo, roundUp(cursor + 1)); at < to; at += Page) bytes[at] = 0
    touchedTo = Math.max(touchedTo, to)
  }
  setImmediate(touch)
  /** The mapping goes (never throws: a descriptor is closed after it whatever happens). */
  const unmapNow = () => {
    if (written || closed) return
    try {
      native.unmap(buffer)
    } catch {
      // then it goes when the buffer is collected
    }
  }
  /** A larger mapping of the same file (its records are in it); false if it cannot be had. */
  const grow = (needed: number): boolean => {
    const next = Math.max(capacity * 2, roundUp(needed))
    let larger: ArrayBuffer
    try {
      larger = native.map(fd, next)
    } catch {
      return false
    }
    unmapNow()
    buffer = larger
    bytes = new Uint8Array(buffer)
    capacity = next
    touchedTo = roundUp(cursor + 1)
    return true
  }
  const release = () => {
    unmapNow()
    closed = true
  }
  return {
    mapped: true,
    append: (record) => {
      if (written) {
        cursor += Fs.writeSync(fd, record, 0, record.length, cursor)
        return
      }
      // Never a record stored in part for want of room.
      if (capacity - cursor < record.length && !grow(cursor + record.length)) {
        // No larger mapping (a full disk, no address space): the records go on with `pwrite(2)`
        // from the cursor, in the same file, over the zeros after the last one.
        unmapNow()
        written = true
        cursor += Fs.writeSync(fd, record, 0, record.length, cursor)
        return
      }
      bytes.set(record, cursor)
      cursor += record.length
      if (!touchScheduled && touchedTo - cursor < TouchAhead / 2) {
        touchScheduled = true
        setImmediate(touch)
      }
    },
    close: () => {
      release()
      Fs.closeSync(fd)
    },
    closeOffThread: () => {
      // Unmapped first: the descriptor is then the file's last hold, and its close (off this
      // thread) frees the blocks of a replaced file.
      release()
      Fs.close(fd, () => {})
    }
  }
}
