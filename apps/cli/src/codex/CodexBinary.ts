/**
 * Finding the `codex` executable (`--codex PATH`, default `codex` on PATH) and asking its version.
 * A missing binary is a usage error whose message says how to install the tested version.
 */
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ChildEnv } from "@warden/transport"
import { Effect } from "effect"
import * as ExitCodes from "../contract/ExitCodes.js"

/** The codex version Warden is tested against. */
export const TestedVersion = "0.171.0"

export const installHint = `install the tested version with \`npm i -g @openai/codex@${TestedVersion}\`, or pass --codex PATH`

const isExecutableFile = (path: string): boolean => {
  try {
    if (!Fs.statSync(path).isFile()) return false
    Fs.accessSync(path, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * The absolute path of the executable: a name without a slash is searched on PATH, a path is
 * checked as given (relative to the current directory).
 */
export const resolve = (command: string): Effect.Effect<string, ExitCodes.CliExit> =>
  Effect.suspend(() => {
    if (command.includes("/")) {
      const path = Path.resolve(command)
      return isExecutableFile(path)
        ? Effect.succeed(path)
        : Effect.fail(ExitCodes.usage(`codex not found: ${path} is not an executable file; ${installHint}`))
    }
    for (const dir of (process.env["PATH"] ?? "").split(Path.delimiter)) {
      if (dir === "") continue
      const candidate = Path.join(dir, command)
      if (isExecutableFile(candidate)) return Effect.succeed(candidate)
    }
    return Effect.fail(ExitCodes.usage(`codex not found: no \`${command}\` on PATH; ${installHint}`))
  })

/**
 * `codex --version`, trimmed (e.g. `codex-cli 0.171.0`), and the version number in it. The child
 * gets our environment as every child of Warden does (`ChildEnv`: no `WARDEN_*`, no withheld secret).
 */
export const version = (
  binary: string
): Effect.Effect<{ readonly text: string; readonly version: string | undefined }, string> =>
  Effect.async<{ readonly text: string; readonly version: string | undefined }, string>((resume) => {
    const child = execFile(
      binary,
      ["--version"],
      { env: ChildEnv.make(), timeout: 20_000, killSignal: "SIGKILL" },
      (error, stdout, stderr) => {
        if (error !== null) {
          resume(
            Effect.fail(`\`${binary} --version\` failed: ${(String(stderr).trim() || error.message).split("\n")[0]}`)
          )
          return
        }
        const text = String(stdout).trim()
        resume(Effect.succeed({ text, version: /(\d+\.\d+\.\d+(?:-[\w.]+)?)/.exec(text)?.[1] }))
      }
    )
    return Effect.sync(() => {
      child.kill("SIGKILL")
    })
  })
