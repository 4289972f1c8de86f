/**
 * A turn's status and error as the server reports them, with the error's `codexErrorInfo` read.
 *
 * Measured on 0.171.0: `turn.error` is `{message, codexErrorInfo, additionalDetails, misalignment}`;
 * `codexErrorInfo` is either a bare code (`"internalServerError"`, `"other"`, `"usageLimitExceeded"`)
 * or a one-key object carrying an HTTP status (`{responseStreamDisconnected: {httpStatusCode: null}}`).
 */
import { Either, Schema } from "effect"
import * as OpenEnum from "./OpenEnum.js"
import { isRecord } from "./Json.js"

/** The turn statuses of 0.171.0. */
export const TurnStatuses = ["completed", "interrupted", "failed", "inProgress"] as const
/**
 * A turn's status, with a value added since decoding as `"unknown"`.
 *
 * `inProgress` while it runs (the `turn/start` result); `completed`, `interrupted` or `failed` at
 * `turn/completed`.
 */
export const TurnStatus = OpenEnum.make(...TurnStatuses)
export type TurnStatus = OpenEnum.Open<(typeof TurnStatuses)[number]>

/** Codes listed in the 0.171.0 schema (`CodexErrorInfo`); the server may send others. */
export const KnownCodexErrorCodes = [
  "contextWindowExceeded",
  "sessionBudgetExceeded",
  "usageLimitExceeded",
  "rateLimitExceeded",
  "flexUnavailable",
  "serverOverloaded",
  "modelNotFound",
  "policyCapacityUnavailable",
  "cyberPolicy",
  "bioPolicy",
  "misalignmentPolicyViolation",
  "tooManyDenials",
  "internalServerError",
  "unauthorized",
  "badRequest",
  "threadRollbackFailed",
  "sandboxError",
  "other",
  "inferenceHookDenied",
  "httpConnectionFailed",
  "responseStreamConnectionFailed",
  "responseStreamDisconnected",
  "responseTooManyFailedAttempts",
  "activeTurnNotSteerable"
] as const

/**
 * The machine-readable reason of a turn error, read from its `codexErrorInfo` by `codexErrorInfoOf`.
 *
 * `code` is the bare string or the single key of the object form, kept verbatim (an unknown code is
 * still worth showing a person). `httpStatusCode` is lifted out of the object form when present;
 * `detail` keeps the object's value (e.g. `{turnKind}` for activeTurnNotSteerable), else null.
 */
export interface CodexErrorInfo {
  readonly code: string
  readonly httpStatusCode: number | null
  readonly detail: unknown
}

/**
 * Why a turn (or one attempt in it) failed, as `turn/completed` and the `error` notification tell it.
 *
 * `message` is for a person; `codexErrorInfo` says what kind of failure it was (null when the
 * server did not say).
 */
export interface TurnError {
  readonly message: string
  readonly codexErrorInfo: CodexErrorInfo | null
  readonly additionalDetails: string | null
}

/**
 * Reads a wire `codexErrorInfo` into a `CodexErrorInfo`, or null when it is neither a string nor an object.
 *
 * An object with other than one key becomes code `"unknown"`, with the whole object as `detail`.
 *
 * @example
 * ```ts
 * import { Turn } from "@warden/protocol"
 *
 * Turn.codexErrorInfoOf("usageLimitExceeded")
 * // { code: "usageLimitExceeded", httpStatusCode: null, detail: null }
 * Turn.codexErrorInfoOf({ responseStreamDisconnected: { httpStatusCode: 502 } })
 * // { code: "responseStreamDisconnected", httpStatusCode: 502, detail: { httpStatusCode: 502 } }
 * ```
 */
export const codexErrorInfoOf = (wire: unknown): CodexErrorInfo | null => {
  if (typeof wire === "string") return { code: wire, httpStatusCode: null, detail: null }
  if (!isRecord(wire)) return null
  const keys = Object.keys(wire)
  if (keys.length !== 1) return { code: "unknown", httpStatusCode: null, detail: wire }
  const code = keys[0]!
  const detail = wire[code]
  const status = isRecord(detail) ? detail["httpStatusCode"] : undefined
  return {
    code,
    httpStatusCode: typeof status === "number" ? status : null,
    detail: detail ?? null
  }
}

const TurnErrorWire = Schema.Struct({
  message: Schema.String,
  codexErrorInfo: Schema.optionalWith(Schema.Unknown, { default: () => null }),
  additionalDetails: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
})
const decodeTurnErrorWire = Schema.decodeUnknownEither(TurnErrorWire)

/**
 * Reads a wire turn error into a `TurnError`, or null when there is none (null or absent).
 *
 * It never fails: a turn's end must reach the supervisor even if its error drifted in shape. An
 * error without a string `message` keeps its JSON (the first 500 characters) as the message, so
 * nothing is hidden.
 */
export const turnErrorOf = (wire: unknown): TurnError | null => {
  if (wire === null || wire === undefined) return null
  return Either.match(decodeTurnErrorWire(wire), {
    onLeft: () => ({
      message: `unreadable turn error: ${JSON.stringify(wire)?.slice(0, 500) ?? String(wire)}`,
      codexErrorInfo: null,
      additionalDetails: null
    }),
    onRight: (error) => ({
      message: error.message,
      codexErrorInfo: codexErrorInfoOf(error.codexErrorInfo),
      additionalDetails: error.additionalDetails
    })
  })
}
