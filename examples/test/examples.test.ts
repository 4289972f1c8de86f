import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

// The examples in docs/embedding.md are real programs: run them against the pinned codex, offline.
const tsx = join(__dirname, "../../node_modules/.bin/tsx")
/**
 * Run an example in its own process group; past 60 s the whole group is SIGKILLed (tsx runs the
 * program in a node child: killing tsx alone would leave that child, and its codex, behind).
 */
const runExample = (file: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(tsx, [join(__dirname, "../src", file)], { detached: true, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += String(chunk)))
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // already gone
      }
    }, 60_000)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

describe("examples", () => {
  it("the promise example answers a card and completes", async () => {
    const { code, stdout, stderr } = await runExample("promise-api.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout).toMatch(/card c1: run: echo hello from codex/)
    expect(stdout).toMatch(/status: completed; final message: The command ran; all done\./)
  }, 90_000)

  it("the Effect example decides by handler and completes", async () => {
    const { code, stdout } = await runExample("effect-api.ts")
    expect(code).toBe(0)
    expect(stdout).toMatch(/status: completed; final message: The command ran; all done\./)
  }, 90_000)

  it("the web inbox example serves the card on its own supervisor; accepted over the inbox's API, the item completes", async () => {
    const { code, stdout, stderr } = await runExample("web-inbox.ts")
    expect(code, stderr).toBe(0)
    expect(stdout).toMatch(/inbox listening at http:\/\/127\.0\.0\.1:\d+\//)
    expect(stdout).toMatch(/card c1 \(run: echo hello from codex.*\): accepted by person \(web\)/)
    expect(stdout).toMatch(/status: completed; final message: The command ran; all done\./)
  }, 90_000)
})
