/**
 * The inbox's answers to what went wrong: a body too large, one that is not JSON, a decode error
 * without the values it quotes (a prompt is never echoed back), and errors described in words.
 *
 * @internal
 */
import { HttpServerError, HttpServerResponse } from "@effect/platform"
import { Cause, Effect } from "effect"

/** What a value is, in words, without any of its content. */
export const describeValue = (value: unknown): string => {
  if (value === null) return "null"
  if (Array.isArray(value)) return `an array of ${value.length}`
  if (typeof value === "string") return `a string of ${value.length} characters`
  if (typeof value === "object") return `an object with ${Object.keys(value).length} key(s)`
  return `a ${typeof value}`
}

export const tooLarge = (max: number) =>
  HttpServerResponse.unsafeJson(
    { _tag: "PayloadTooLarge", message: `the body is larger than ${max} bytes` },
    { status: 413 }
  )

export const decodeError = (
  message: string,
  issues: ReadonlyArray<{
    readonly _tag: string
    readonly path: ReadonlyArray<PropertyKey>
    readonly message: string
  }> = []
) => HttpServerResponse.unsafeJson({ _tag: "HttpApiDecodeError", issues, message }, { status: 400 })

/** Why reading the request failed, when that is the client's doing: a body over the bound, or one that is not JSON. */
export const readFailure = (cause: Cause.Cause<unknown>): "TooLarge" | "NotJson" | undefined => {
  for (const error of [...Cause.failures(cause), ...Cause.defects(cause)]) {
    if (!HttpServerError.isServerError(error) || error._tag !== "RequestError") continue
    const inner = error.cause
    if (inner instanceof Error && inner.message === "maxBytes exceeded") return "TooLarge"
    if (error.reason === "Decode" && inner instanceof SyntaxError) return "NotJson"
  }
  return undefined
}

/**
 * A schema decode error without the values it quotes: `HttpApi` answers 400 with the schema's
 * messages, `Expected ..., actual <the input>`, which repeated a 20 MB prompt whole. Each issue keeps
 * its kind, its path and what was expected; the input is never repeated.
 */
export const withoutEcho = (
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.sync(() => {
    if (response.status !== 400 || response.body._tag !== "Uint8Array") return response
    let parsed: { _tag?: unknown; issues?: unknown; message?: unknown } | undefined
    try {
      parsed = JSON.parse(new TextDecoder().decode(response.body.body))
    } catch {
      return response
    }
    if (parsed === null || typeof parsed !== "object" || parsed._tag !== "HttpApiDecodeError") return response
    const issues = (Array.isArray(parsed.issues) ? parsed.issues : [])
      .slice(0, 10)
      .map((issue: { _tag?: unknown; path?: unknown; message?: unknown }) => {
        const path = Array.isArray(issue.path)
          ? issue.path
              .filter((p): p is string | number => typeof p === "string" || typeof p === "number")
              .map((p) => (typeof p === "string" ? p.slice(0, 64) : p))
          : []
        const expected =
          typeof issue.message === "string" ? issue.message.split(", actual ")[0]!.split("\n")[0]!.slice(0, 200) : ""
        return {
          _tag: typeof issue._tag === "string" ? issue._tag : "Type",
          path,
          message: expected.startsWith("Expected") ? expected : kindOf(issue._tag)
        }
      })
    const message =
      issues.length === 0
        ? "the body does not match the expected schema"
        : issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`).join("; ")
    return decodeError(message, issues)
  })

const kindOf = (tag: unknown): string =>
  tag === "Missing"
    ? "is missing"
    : tag === "Unexpected"
      ? "is not expected"
      : tag === "Forbidden"
        ? "is not allowed"
        : "is not of the expected type"

export const describeServeError = (error: unknown): string => {
  const cause = (error as { cause?: unknown })?.cause
  if (cause instanceof Error) return cause.message
  return error instanceof Error ? error.message : String(error)
}
