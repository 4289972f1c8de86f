/**
 * The CLI in a real terminal: a private tmux server (its own socket) running
 * `warden ARGS` (CliProcess.command: the CLI compiled for this run) in one pane, keys sent with `send-keys`, the screen read with
 * `capture-pane`. A shell in the pane waits for the CLI and keeps its exit status. Closing the
 * scope stops the CLI (SIGTERM, bounded wait, SIGKILL to everything under the pane) and the tmux
 * server; if the test process dies first (Ctrl-C, a kill), a `Watchdog` stops the server (its
 * pane's CLI with it) and removes its directory.
 *
 * tmux is a Debian package (`apt-get install tmux`). When it is missing these tests fail, saying so.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Data, type Duration, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import { ProcessTree } from "@warden/testkit"
import * as CliProcess from "./CliProcess.js"
import * as Watchdog from "@warden/test-support/Watchdog"

export class TmuxError extends Data.TaggedError("TmuxError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/** The tmux executable, or a failure that says how to install it. */
export const executable: Effect.Effect<string, TmuxError> = Effect.suspend(() => {
  for (const dir of (process.env["PATH"] ?? "").split(Path.delimiter)) {
    const candidate = Path.join(dir, "tmux")
    if (dir !== "" && Fs.existsSync(candidate)) return Effect.succeed(candidate)
  }
  return Effect.fail(
    new TmuxError({
      detail:
        "tmux is not installed (`which tmux` finds nothing). The human-mode tests drive `warden` in a real terminal " +
        "under tmux: install it with `apt-get install -y tmux` (Debian package `tmux`), e.g. in the CI setup."
    })
  )
})

export interface Pane {
  /** The shell in the pane; the CLI (node) runs under it. */
  readonly pid: number
  /** The visible screen (trailing spaces trimmed). */
  readonly screen: Effect.Effect<string, TmuxError>
  /** The visible screen and the scrollback. */
  readonly history: Effect.Effect<string, TmuxError>
  readonly sendKeys: (...keys: ReadonlyArray<string>) => Effect.Effect<void, TmuxError>
  /** Polls the visible screen until `predicate` holds; returns that screen. */
  readonly waitFor: (
    what: string,
    predicate: (screen: string) => boolean,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<string, TmuxError>
  /** Waits for the command to exit; returns its exit status. */
  readonly exitStatus: (timeout?: Duration.DurationInput) => Effect.Effect<number, TmuxError>
}

let counter = 0

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

export const run = (
  args: ReadonlyArray<string>,
  options?: { readonly env?: Readonly<Record<string, string>>; readonly width?: number; readonly height?: number }
): Effect.Effect<Pane, TmuxError, Scope.Scope> =>
  Effect.gen(function* () {
    const tmux = yield* executable
    const socket = `warden-test-${process.pid}-${++counter}`
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-tmux-"))),
      (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
    )
    const tmuxSync = (tmuxArgs: ReadonlyArray<string>) =>
      Effect.try({
        try: () =>
          ChildProcess.execFileSync(tmux, ["-L", socket, ...tmuxArgs], {
            encoding: "utf8",
            timeout: 10_000,
            stdio: ["ignore", "pipe", "pipe"]
          }),
        catch: (e) => new TmuxError({ detail: `tmux ${tmuxArgs.join(" ")} failed: ${String(e)}` })
      })
    Fs.writeFileSync(
      Path.join(dir, "tmux.conf"),
      "set -g history-limit 10000\nset -g status off\nset -g scroll-on-clear off\n"
    )
    // The pane runs a shell that waits for the CLI and writes its exit status to a file (tmux 3.3
    // does not always reap a pane's process by itself, so its own exit status is not reliable).
    const exitFile = Path.join(dir, "exit-status")
    const script = Path.join(dir, "run.sh")
    Fs.writeFileSync(
      script,
      [
        "#!/bin/sh",
        `cd ${shellQuote(CliProcess.repoRoot)}`,
        ...Object.entries({ XDG_STATE_HOME: CliProcess.stateHome, ...options?.env }).map(
          ([k, v]) => `export ${k}=${shellQuote(v)}`
        ),
        "trap 'true' INT TERM",
        CliProcess.command(args).map(shellQuote).join(" "),
        `echo $? > ${shellQuote(exitFile)}`,
        "exec sleep 3600",
        ""
      ].join("\n"),
      { mode: 0o755 }
    )
    yield* Effect.acquireRelease(
      tmuxSync([
        "-f",
        Path.join(dir, "tmux.conf"),
        "new-session",
        "-d",
        "-s",
        "main",
        "-x",
        String(options?.width ?? 200),
        "-y",
        String(options?.height ?? 50),
        script
      ]),
      () => tmuxSync(["kill-server"]).pipe(Effect.ignore)
    )
    // A daemon: if this process dies before the scope closes (Ctrl-C, a kill), the server goes
    // anyway, and the CLI in its pane with it (SIGHUP), and the directory.
    yield* Watchdog.onDeath('"$WT_TMUX" -L "$WT_SOCKET" kill-server >/dev/null 2>&1; rm -rf "$WT_DIR"', {
      WT_TMUX: tmux,
      WT_SOCKET: socket,
      WT_DIR: dir
    })
    const pid = Number((yield* tmuxSync(["display-message", "-p", "-t", "main", "#{pane_pid}"])).trim())

    /** The CLI's exit status, once it has exited. */
    const status = Effect.sync(() => {
      try {
        const text = Fs.readFileSync(exitFile, "utf8").trim()
        return text === "" ? undefined : Number(text)
      } catch {
        return undefined
      }
    })

    // Stop whatever still runs under the pane before the server goes (registered after it: runs first).
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const tree = ProcessTree.descendants(pid)
        if ((yield* status) === undefined) {
          // The CLI is the shell's child (node running the CLI compiled for this run).
          for (const child of tree.filter((p) => ProcessTree.commandLine(p).includes(CliProcess.bin))) {
            try {
              process.kill(child, "SIGTERM")
            } catch {
              // gone
            }
            break
          }
          yield* status.pipe(
            Effect.filterOrFail(
              (s) => s !== undefined,
              () => "running"
            ),
            Effect.retry(Schedule.spaced("100 millis")),
            Effect.timeoutOption("8 seconds"),
            Effect.ignore
          )
        }
        for (const p of [...tree, ...ProcessTree.descendants(pid), pid]) {
          try {
            process.kill(p, "SIGKILL")
          } catch {
            // gone
          }
        }
      })
    )

    const trim = (text: string) =>
      text
        .split("\n")
        .map((l) => l.trimEnd())
        .join("\n")
        .trimEnd()
    const screen = Effect.map(tmuxSync(["capture-pane", "-p", "-J", "-t", "main"]), trim)
    const history = Effect.map(tmuxSync(["capture-pane", "-p", "-J", "-S", "-", "-t", "main"]), trim)

    const waitFor = (
      what: string,
      predicate: (screen: string) => boolean,
      timeout: Duration.DurationInput = "20 seconds"
    ) => {
      let last = ""
      return screen.pipe(
        Effect.tap((s) => {
          last = s
        }),
        Effect.filterOrFail(predicate, () => new TmuxError({ detail: "not yet" })),
        Effect.retry(Schedule.spaced("150 millis")),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new TmuxError({ detail: `timed out waiting for ${what}; the screen:\n${last}` })
        })
      )
    }

    return {
      pid,
      screen,
      history,
      sendKeys: (...keys) => tmuxSync(["send-keys", "-t", "main", ...keys]).pipe(Effect.asVoid),
      waitFor,
      exitStatus: (timeout = "30 seconds") =>
        status.pipe(
          Effect.filterOrFail(
            (s): s is number => s !== undefined,
            () => new TmuxError({ detail: "running" })
          ),
          Effect.retry(Schedule.spaced("150 millis")),
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () => new TmuxError({ detail: "the command in the pane did not exit" })
          }),
          Effect.catchTag("TmuxError", (e) =>
            Effect.flatMap(
              Effect.orElseSucceed(screen, () => ""),
              (s) => Effect.fail(new TmuxError({ detail: `${e.detail}; the screen:\n${s}` }))
            )
          )
        )
    }
  })
