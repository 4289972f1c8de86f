/**
 * `warden doctor [--codex PATH] [--state PATH] [--json]`: which codex, which version, whether it
 * is the tested one, and a drift report from the binary's own schema (`generate-json-schema`)
 * against what Warden handles; then how the ledger at `--state` (default as `warden run`) would
 * journal its answers (`Ledger.answerJournalMode`: a mapped file, or `write(2)` and why). Exit 1
 * when some answer or refusal Warden writes no longer validates; exit 2 when there is no codex to
 * examine.
 */
import { Command, Options } from "@effect/cli"
import { SecretMask } from "@warden/approvals"
import * as SchemaDump from "@warden/protocol/SchemaDump"
import { ChildEnv } from "@warden/transport"
import type { Ledger } from "@warden/ledger"
import { Effect, type Option } from "effect"
import * as CodexBinary from "../codex/CodexBinary.js"
import * as SchemaDrift from "../codex/SchemaDrift.js"
import * as ExitCodes from "../contract/ExitCodes.js"
import * as Opts from "../contract/Options.js"
import * as StatePath from "../state/StatePath.js"

const options = {
  codex: Opts.codex,
  state: Opts.state,
  json: Options.boolean("json").pipe(Options.withDescription("print the report as one JSON object on stdout"))
}

const list = (values: ReadonlyArray<string>) => (values.length === 0 ? "none" : values.join(", "))

export const reportLines = (
  binary: string,
  version: { readonly text: string; readonly version: string | undefined },
  dump: SchemaDump.SchemaDump,
  report: SchemaDrift.Report,
  journal?: { readonly directory: string; readonly mode: Ledger.AnswerJournalMode }
): ReadonlyArray<string> => {
  const tested = version.version === CodexBinary.TestedVersion
  const invalid = report.answers.filter((a) => a.verdict !== "valid")
  return [
    `codex:    ${binary}`,
    `version:  ${version.text}${tested ? ` (the tested version)` : ` (NOT the tested version ${CodexBinary.TestedVersion}; ${CodexBinary.installHint})`}`,
    `schema:   ${dump.serverRequestMethods.length} server requests, ${dump.serverNotificationMethods.length} notifications, ${dump.clientRequestMethods.length} client requests`,
    "",
    `server requests Warden does not know (refused with an error frame): ${list(report.unknownServerRequests)}`,
    `server requests Warden handles that this codex no longer sends: ${list(report.goneServerRequests)}`,
    `notifications Warden maps that this codex no longer sends: ${list(report.goneNotifications)}`,
    `notifications passed through untyped: ${report.unmappedNotifications.length}`,
    `answers and refusals checked against this codex's schema: ${report.answers.length}, ${invalid.length} do not validate`,
    ...invalid.map((a) => `  BREAKING ${a.method} ${a.answer} ${JSON.stringify(a.result)}: ${a.detail ?? a.verdict}`),
    "",
    report.breaking
      ? "drift: BREAKING (an answer Warden writes no longer validates; update Warden or pin the tested codex)"
      : report.unknownServerRequests.length + report.goneServerRequests.length + report.goneNotifications.length > 0
        ? "drift: some, none of it breaks an answer"
        : "drift: none",
    ...(journal === undefined
      ? []
      : [
          "",
          journal.mode.mode === "mapped"
            ? `answer journal: a mapped file (${journal.mode.reason}; module ${journal.mode.module})`
            : `answer journal: write(2), a few microseconds more per answer (${journal.mode.reason})`,
          `  where:  ${journal.directory}`
        ])
  ]
}

/** How the ledger at `--state` would journal its answers (the ledger's module loaded only here). */
const journalOf = (state: Option.Option<string>) =>
  Effect.promise(() => import("@warden/ledger")).pipe(
    Effect.map(({ Ledger }) => {
      const filename = StatePath.resolve(state)
      return { directory: `${filename}.answers`, mode: Ledger.answerJournalMode({ filename })! }
    })
  )

export const handler = (args: {
  readonly codex: string
  readonly state: Option.Option<string>
  readonly json: boolean
}) =>
  Effect.gen(function* () {
    const binary = yield* CodexBinary.resolve(args.codex)
    const version = yield* CodexBinary.version(binary).pipe(
      Effect.mapError((message) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message }))
    )
    // Ours, as every child of Warden gets it: without WARDEN_* and without withheld secrets.
    const dump = yield* SchemaDump.generate(binary, { env: ChildEnv.make() }).pipe(
      Effect.mapError((error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: error.message }))
    )
    const report = SchemaDrift.check(dump, SchemaDump.makeValidator(dump))
    const journal = yield* journalOf(args.state)
    // What it prints comes from the user (the codex path, the --state path), the environment (the
    // journal module's path) and the binary (its version text, the validator's words about its
    // schema): every line, and every such field of --json, through the one masking function.
    const mask = SecretMask.maskText
    if (args.json) {
      process.stdout.write(
        JSON.stringify({
          codex: mask(binary),
          version: version.version ?? null,
          versionText: mask(version.text),
          testedVersion: CodexBinary.TestedVersion,
          tested: version.version === CodexBinary.TestedVersion,
          ...report,
          unknownServerRequests: report.unknownServerRequests.map(mask),
          unmappedNotifications: report.unmappedNotifications.map(mask),
          answers: report.answers.map((a) => (a.detail === undefined ? a : { ...a, detail: mask(a.detail) })),
          answerJournal: {
            directory: mask(journal.directory),
            ...journal.mode,
            module: journal.mode.module === undefined ? undefined : mask(journal.mode.module),
            reason: mask(journal.mode.reason)
          }
        }) + "\n"
      )
    } else {
      for (const line of reportLines(binary, version, dump, report, journal)) process.stdout.write(mask(line) + "\n")
    }
    if (report.breaking) return yield* new ExitCodes.CliExit({ code: ExitCodes.Failed })
  })

export const command = Command.make("doctor", options, handler).pipe(
  Command.withDescription(
    "check the codex binary (its version, and drift between its protocol schema and what Warden handles) and how the ledger journals answers on this machine"
  )
)
