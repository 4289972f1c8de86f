/**
 * The smallest driver of `codex app-server` that does what the benchmark's turn needs, written
 * the way a hand-rolled client is: node:child_process + readline, one pending map, a switch on the
 * method. It handshakes, starts a thread and a turn, accepts every approval request, and returns
 * when the turn completes. No deadlines, no masking, no restarts: the floor Warden is compared to.
 */
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import type { RealCodex } from "@warden/testkit"
import { nowMs } from "./Stats.js"

export interface DirectRun {
  /** Spawn to `initialize` response. */
  readonly readyMs: number
  /** Spawn to `turn/completed`. */
  readonly totalMs: number
  readonly approvals: number
  readonly status: string
}

const KILL_GRACE_MS = 2_000

export const run = (launch: RealCodex.Launch, prompt: string, timeoutMs = 60_000): Promise<DirectRun> =>
  new Promise<DirectRun>((resolve, reject) => {
    const started = nowMs()
    const child = spawn(launch.command, [...launch.args], {
      cwd: launch.cwd,
      env: launch.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true // its own process group, as Warden spawns it: the commands it runs die with it
    })
    let stderr = ""
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (text: string) => {
      stderr = (stderr + text).slice(-4096)
    })
    const pending = new Map<number, (message: any) => void>()
    let nextId = 1
    let readyMs = 0
    let approvals = 0
    let threadId: string | undefined
    let settled = false

    const send = (message: unknown) => child.stdin.write(JSON.stringify(message) + "\n")
    const request = (method: string, params: unknown, onResult: (message: any) => void) => {
      const id = nextId++
      pending.set(id, onResult)
      send({ jsonrpc: "2.0", id, method, params })
    }
    const stop = () => {
      child.stdin.end()
      try {
        process.kill(-child.pid!, "SIGTERM")
      } catch {
        // already gone
      }
      const kill = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL")
        } catch {
          // already gone
        }
      }, KILL_GRACE_MS)
      kill.unref()
      child.once("exit", () => clearTimeout(kill))
    }
    const finish = (error: Error | undefined, result?: DirectRun) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      stop()
      // Resolve once the child is gone, so runs never overlap.
      const done = () => (error ? reject(error) : resolve(result!))
      if (child.exitCode !== null || child.signalCode !== null) done()
      else child.once("exit", done)
    }
    const timer = setTimeout(
      () => finish(new Error(`direct driver: no turn/completed within ${timeoutMs} ms; stderr: ${stderr}`)),
      timeoutMs
    )
    child.on("error", (error) => finish(error))
    child.on("exit", (code, signal) => {
      if (!settled)
        finish(
          new Error(`direct driver: codex exited (${code ?? signal}) before the turn completed; stderr: ${stderr}`)
        )
    })

    createInterface({ input: child.stdout }).on("line", (line) => {
      if (line.trim().length === 0) return
      const message = JSON.parse(line)
      if (message.method === undefined) {
        const done = pending.get(message.id)
        pending.delete(message.id)
        done?.(message)
        return
      }
      switch (message.method) {
        case "item/commandExecution/requestApproval":
        case "item/fileChange/requestApproval":
          approvals++
          send({ jsonrpc: "2.0", id: message.id, result: { decision: "accept" } })
          return
        case "turn/completed":
          if (message.params?.threadId === threadId) {
            finish(undefined, {
              readyMs,
              totalMs: nowMs() - started,
              approvals,
              status: String(message.params?.turn?.status)
            })
          }
          return
        default:
          if (message.id !== undefined) {
            // A server request this driver does not handle: refuse it, as a careful client would.
            send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: `unsupported: ${message.method}` } })
          }
      }
    })

    request(
      "initialize",
      { clientInfo: { name: "direct-driver", title: "Direct driver", version: "0.0.1" } },
      (init) => {
        if (init.error) return finish(new Error(`initialize failed: ${JSON.stringify(init.error)}`))
        readyMs = nowMs() - started
        send({ jsonrpc: "2.0", method: "initialized" })
        request(
          "thread/start",
          { approvalPolicy: "on-request", sandbox: "workspace-write", cwd: launch.workspace },
          (started) => {
            threadId = started.result?.thread?.id
            if (threadId === undefined) return finish(new Error(`thread/start failed: ${JSON.stringify(started)}`))
            request("turn/start", { threadId, input: [{ type: "text", text: prompt }] }, (turn) => {
              if (turn.error) finish(new Error(`turn/start failed: ${JSON.stringify(turn.error)}`))
            })
          }
        )
      }
    )
  })
