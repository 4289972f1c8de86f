/**
 * Where the CLI writes: result lines to stdout, human lines to stderr, and (when stderr is a
 * terminal) a live region at the bottom of stderr that is redrawn in place with standard cursor
 * moves: up to the region's first line, erase to the end of the screen, write the new lines.
 * Lines written while a region is shown go above it (the region is erased and redrawn), so
 * nothing scrolls away half-drawn. Region lines are cut to the terminal width so a redraw always
 * knows how many rows it covers.
 */
import type * as Tty from "node:tty"

export interface Screen {
  /** Whether a live region can be drawn (stderr is a terminal). */
  readonly live: boolean
  /** One line on stdout. */
  readonly out: (line: string) => void
  /** One line on stderr, above the live region. */
  readonly err: (line: string) => void
  /** Replace the live region (no-op when not live). */
  readonly region: (lines: ReadonlyArray<string>) => void
  /** Stop drawing; the last region stays on screen as it is. */
  readonly release: () => void
  readonly columns: () => number
  readonly rows: () => number
}

const ESC = "\u001b["

/** Visible length: ANSI SGR sequences take no room. */
const visible = (text: string): string => text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "")

/** Cut a line to `width` visible characters, keeping SGR sequences and resetting style at the end. */
export const fit = (line: string, width: number): string => {
  if (visible(line).length <= width) return line
  let out = ""
  let shown = 0
  for (let i = 0; i < line.length && shown < width - 1; ) {
    const sgr = /^\u001b\[[0-9;?]*[A-Za-z]/.exec(line.slice(i))
    if (sgr) {
      out += sgr[0]
      i += sgr[0].length
      continue
    }
    const char = String.fromCodePoint(line.codePointAt(i)!)
    out += char
    i += char.length
    shown++
  }
  return `${out}…${ESC}0m`
}

/**
 * Without a terminal, what is written to stdout and stderr in one turn of the event loop goes out
 * together: the first line of a turn corks both streams and the end of the turn (`setImmediate`)
 * uncorks them, so each stream writes its lines in one system call instead of one per line (a
 * fleet writes thousands). Every write to the two streams in between, the screen's or not (the
 * logger, a command's direct lines), waits in the same stream's buffer, in the order written.
 */
let corked = false

const uncork = () => {
  if (!corked) return
  corked = false
  process.off("exit", uncork)
  process.stdout.uncork()
  process.stderr.uncork()
}

const later = (stream: NodeJS.WriteStream, text: string) => {
  if (!corked) {
    corked = true
    process.stdout.cork()
    process.stderr.cork()
    setImmediate(uncork)
    process.once("exit", uncork)
  }
  stream.write(text)
}

/**
 * Call `done` once everything written to stdout and stderr has left the process. A pipe whose
 * reader is slower than Warden holds what was written in the process; `process.exit` then drops
 * it (the tail of the JSON lines, `run.finished` included), so the CLI exits through this. A
 * stream that is closed, or fails (its reader gone), counts as done.
 */
export const whenWritten = (done: () => void): void => {
  uncork()
  let left = 2
  const one = () => {
    if (--left === 0) done()
  }
  for (const stream of [process.stdout, process.stderr]) {
    if (stream.destroyed || stream.writableEnded) one()
    // Called once this write, and every write before it, is done (or failed).
    else stream.write("", () => one())
  }
}

export const make = (options?: { readonly live?: boolean }): Screen => {
  const stdout = process.stdout
  const stderr = process.stderr
  const live = options?.live ?? stderr.isTTY === true
  const sameTerminal = stdout.isTTY === true && stderr.isTTY === true
  let drawn = 0
  let current: ReadonlyArray<string> = []
  let released = false

  const columns = () => (stderr as Tty.WriteStream).columns ?? 100
  const rows = () => (stderr as Tty.WriteStream).rows ?? 40

  const erase = () => {
    if (drawn > 0) stderr.write(`${ESC}${drawn}F${ESC}J`)
    drawn = 0
  }
  const draw = () => {
    if (!live || released) return
    const width = Math.max(20, columns())
    const height = Math.max(1, rows() - 1)
    const lines = current.slice(0, height).map((l) => fit(l, width))
    if (lines.length > 0) stderr.write(lines.join("\n") + "\n")
    drawn = lines.length
  }

  return {
    live,
    out: (line) => {
      if (live && !released && sameTerminal) {
        erase()
        stdout.write(line + "\n")
        draw()
      } else if (live) {
        stdout.write(line + "\n")
      } else {
        later(stdout, line + "\n")
      }
    },
    err: (line) => {
      if (live && !released) {
        erase()
        stderr.write(line + "\n")
        draw()
      } else if (live) {
        stderr.write(line + "\n")
      } else {
        later(stderr, line + "\n")
      }
    },
    region: (lines) => {
      if (!live || released) return
      current = lines
      erase()
      draw()
    },
    release: () => {
      released = true
    },
    columns,
    rows
  }
}
