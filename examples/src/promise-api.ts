/**
 * Embedding Warden without Effect: the promise facade.
 *
 *   pnpm --filter @warden/examples promise     (runs offline against the pinned codex)
 */
import { createSupervisor } from "@warden/supervisor"
import type { CodexCommand } from "@warden/supervisor"
import { withOfflineCodex } from "./OfflineCodex.js"

export const main = async (codex: CodexCommand.CodexCommand, workspace: string): Promise<void> => {
  const warden = await createSupervisor({
    codex,
    concurrency: 2,
    approvals: {
      deadlines: { default: "2 minutes" },
      // Rules run first; deny rules win. Anything no rule decides goes to the handler/inbox.
      rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] }
    }
  })
  try {
    // A person (or program) answers cards through the inbox.
    const answering = (async () => {
      for await (const update of warden.cards()) {
        if (update._tag === "Opened") {
          console.log(`card ${update.card.id}: ${update.card.title}`)
          await warden.answer(update.card.id, update.card.summary.kind === "command" ? "accept" : "decline")
        }
      }
    })()
    const result = await warden.run({ prompt: "say hello", cwd: workspace })
    console.log(`status: ${result.status}; final message: ${result.finalMessage}`)
    void answering
  } finally {
    await warden.close() // refuses open cards, stops the child
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  withOfflineCodex(main).catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
