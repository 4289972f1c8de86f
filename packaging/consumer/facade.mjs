/**
 * A plain JavaScript (ESM) program that embeds Warden through the promise facade, run by the
 * outside-install test in a project that installed the packed tarballs with npm. No TypeScript,
 * no loader, no build: what `npm install @warden/supervisor` gives.
 *
 * Only to run without an account or the network, the codex it supervises is the pinned binary
 * (the @openai/codex dependency of @warden/testkit) pointed at the test kit's scripted model on
 * loopback; in your own code `codex` is `{ command: "codex" }` or a path (see
 * examples/src/OfflineCodex.ts in the repository).
 *
 * Prints one JSON line: what happened.
 */
import { createSupervisor } from "@warden/supervisor"
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"

const offlineCodex = Effect.gen(function* () {
  const model = yield* ScriptedModel.make([
    Step.execCommand({
      cmd: "echo hello from an installed warden",
      escalated: true,
      justification: "the program wants to show an approval"
    }),
    Step.message("The command ran; all done.")
  ])
  return RealCodex.codexCommand(yield* RealCodex.make({ baseUrl: model.baseUrl }))
})

const main = async (codex) => {
  const warden = await createSupervisor({
    codex,
    concurrency: 1,
    approvals: {
      deadlines: { default: "2 minutes" },
      rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] }
    }
  })
  const cards = []
  try {
    const answering = (async () => {
      for await (const update of warden.cards()) {
        if (update._tag === "Opened") {
          const answer = await warden.answer(
            update.card.id,
            update.card.summary.kind === "command" ? "accept" : "decline"
          )
          cards.push({
            id: update.card.id,
            kind: update.card.summary.kind,
            title: update.card.title,
            answer: answer._tag
          })
        }
      }
    })()
    const result = await warden.run({ prompt: "say hello", cwd: codex.cwd })
    void answering
    return { status: result.status, finalMessage: result.finalMessage, cards, codex: codex.command }
  } finally {
    await warden.close()
  }
}

const report = await Effect.runPromise(
  Effect.scoped(Effect.flatMap(offlineCodex, (codex) => Effect.promise(() => main(codex))))
)
process.stdout.write(`${JSON.stringify(report)}\n`)
