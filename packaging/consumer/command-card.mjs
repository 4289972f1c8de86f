/**
 * What the consumer programs share: a work item started on `supervisor`, whose fake app-server
 * (`FakeAppServer.make({ turns: "manual" })`) then asks for one command approval, `command`.
 * Copied beside them into the outside-install project.
 */
import { Effect } from "effect"

/** Start an item (`prompt`) and have the fake ask to run `command`: its handle, its thread and the request's id. */
export const startWithCommandCard = (supervisor, fake, prompt, command) =>
  Effect.gen(function* () {
    const handle = yield* supervisor.start({ prompt, id: 0 })
    const threadId = yield* handle.threadId
    yield* fake.nextRequest("turn/start")
    const requestId = yield* fake.request("item/commandExecution/requestApproval", {
      threadId,
      turnId: "turn_1",
      itemId: "call_1",
      startedAtMs: 0,
      reason: "needs to run it",
      command,
      cwd: "/tmp/ws",
      availableDecisions: ["accept", "decline"]
    })
    return { handle, threadId, requestId }
  })
