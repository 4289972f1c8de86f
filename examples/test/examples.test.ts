import { execFile } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

// The examples in docs/embedding.md are real programs: run them against the pinned codex, offline.
const tsx = join(__dirname, "../../node_modules/.bin/tsx")
const runExample = (file: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(tsx, [join(__dirname, "../src", file)], { timeout: 60_000, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr })
    })
  })

describe("examples", () => {
  it("the promise example answers a card and completes", async () => {
    const { code, stdout, stderr } = await runExample("promise-api.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout).toMatch(/card c1: run: echo hello from codex/)
    expect(stdout).toMatch(/status: completed; final message: The command ran; all done\./)
  })

  it("the Effect example decides by handler and completes", async () => {
    const { code, stdout } = await runExample("effect-api.ts")
    expect(code).toBe(0)
    expect(stdout).toMatch(/status: completed; final message: The command ran; all done\./)
  })
})
