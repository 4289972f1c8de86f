/**
 * The ten server-to-client request methods of codex app-server 0.171.0 (stable schema), as one
 * exhaustive table. Each method has: a lenient params schema, its refusal (the answer that keeps
 * the turn going, or the error frame where the method has no refusal word), and an encoder from a
 * `Decision` to its answer that refuses what the method cannot express.
 *
 * `Specs` is typed `{ [M in ServerRequestMethod]: MethodSpec<...> }`: adding a method to
 * `ServerRequestMethods` without a spec (and so without a refusal) does not compile.
 */
import { Either, Schema } from "effect"
import type { Decision, DecisionTag } from "./Decision.js"
import type { RequestId } from "./JsonRpc.js"
import { describeParseError } from "./Json.js"
import * as FastDecode from "./internal/FastDecode.js"
import { type MethodSpec, type ParamsOf, Specs } from "./internal/MethodSpecs.js"
import { type Reply, unknownMethodError } from "./internal/Reply.js"
import { isServerRequestMethod, type ServerRequestMethod, ServerRequestMethods } from "./internal/RequestParams.js"

export { type MethodSpec, type ParamsOf, persistOffered, Specs } from "./internal/MethodSpecs.js"
export { type Reply, refusedError, replyFrame, unknownMethodError } from "./internal/Reply.js"
export {
  AttestationParams,
  CommandApprovalParams,
  DynamicToolCallParams,
  ElicitationParams,
  FileChangeApprovalParams,
  isServerRequestMethod,
  LegacyApplyPatchParams,
  LegacyExecParams,
  MaxItems,
  PermissionsApprovalParams,
  type ServerRequestMethod,
  ServerRequestMethods,
  TokenRefreshParams,
  UserInputParams,
  UserInputQuestion
} from "./internal/RequestParams.js"

// ---------------------------------------------------------------------------------------------
// Decoded requests

/**
 * A server request whose method is known and whose params decoded, typed by its `method`.
 *
 * Narrow on `method` to get that method's params type.
 */
export type ServerRequest = {
  readonly [M in ServerRequestMethod]: {
    readonly _tag: "Known"
    readonly id: RequestId
    readonly method: M
    readonly params: ParamsOf[M]
  }
}[ServerRequestMethod]

/**
 * What `decode` makes of a server request, tagged `Known`, `Unknown` or `Malformed`.
 *
 * Every one of them must still be answered (codex waits forever): `refusalFor` gives the answer
 * for each.
 */
export type DecodedRequest =
  | ServerRequest
  /** A method outside the union: answered with the error frame. */
  | { readonly _tag: "Unknown"; readonly id: RequestId; readonly method: string; readonly params: unknown }
  /** A known method whose params do not decode: nobody can be shown it; refused at once. */
  | {
      readonly _tag: "Malformed"
      readonly id: RequestId
      readonly method: ServerRequestMethod
      readonly params: unknown
      readonly detail: string
    }

const decoders = Object.fromEntries(
  ServerRequestMethods.map((m) => [
    m,
    Schema.decodeUnknownEither(Specs[m].params as Schema.Schema<unknown, unknown>, { onExcessProperty: "ignore" })
  ])
) as Record<ServerRequestMethod, (u: unknown) => Either.Either<unknown, import("effect/ParseResult").ParseError>>

const fastDecoders = Object.fromEntries(
  ServerRequestMethods.map((m) => [m, FastDecode.compile(Specs[m].params.ast)])
) as Record<ServerRequestMethod, FastDecode.Decoder | undefined>

/**
 * Decodes a server request's method and params into a `DecodedRequest`; it never fails.
 *
 * A method outside `ServerRequestMethods` is `Unknown`. Params that do not match the method's
 * schema make it `Malformed`, whose `detail` names the failing field and what was expected, never
 * the value (a token may sit there). Missing params decode as `{}`; unknown keys are ignored.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { Decision, ServerRequests } from "@warden/protocol"
 *
 * const request = ServerRequests.decode(message.id, message.method, message.params)
 * const reply = request._tag === "Known"
 *   ? Either.getOrElse(ServerRequests.answerFor(request, Decision.Accept), () => ServerRequests.refusalFor(request))
 *   : ServerRequests.refusalFor(request)
 * const frame = ServerRequests.replyFrame(request.id, reply)
 * ```
 */
export const decode = (id: RequestId, method: string, params: unknown): DecodedRequest => {
  if (!isServerRequestMethod(method)) return { _tag: "Unknown", id, method, params }
  const input = params ?? {}
  // The same answer as the Schema decoder's, faster, for the shapes it covers; otherwise (and for
  // every input it does not accept) the Schema decoder decides (internal/FastDecode.ts).
  const fast = fastDecoders[method]
  if (fast !== undefined) {
    const out = fast(input)
    if (out !== FastDecode.Miss) return { _tag: "Known", id, method, params: out } as ServerRequest
  }
  const decoded = decoders[method](input)
  // The detail names the failing fields and the expected types, never the values (a token may sit there).
  if (Either.isLeft(decoded)) return { _tag: "Malformed", id, method, params, detail: describeParseError(decoded.left) }
  return { _tag: "Known", id, method, params: decoded.right } as ServerRequest
}

/**
 * The refusal for any decoded request, the answer that keeps the turn going.
 *
 * For a `Known` or `Malformed` request it is the method's refusal (see `Specs`); for an `Unknown`
 * method, the `unknownMethodError` frame. It is what Warden writes when nobody decided (a deadline,
 * a closed scope, a failed handler).
 */
export const refusalFor = (request: DecodedRequest): Reply =>
  request._tag === "Unknown"
    ? { _tag: "Error", error: unknownMethodError(request.method) }
    : Specs[request.method].refusal

/**
 * Encodes a decision as the answer to a known request, or says why it cannot be expressed.
 *
 * Fails (`Left`, a reason a person can read) when the method has no word for the decision
 * (`Answers` to a command approval), when the request did not offer it (`accept` missing from a
 * command's `availableDecisions`, an amendment other than the one proposed, a `persist` level not
 * offered), or when its payload does not check out (a grant wider than asked, form content the
 * form does not ask for, more than 32 answers or one longer than 4096 characters to a question,
 * a tool result content item that is not `inputText`, `inputImage` or `inputAudio`). Never
 * coerces a decision into a nearby word. `Decline` always succeeds.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { Decision, ServerRequests } from "@warden/protocol"
 *
 * const encoded = ServerRequests.answerFor(request, Decision.AcceptForSession)
 * if (Either.isLeft(encoded)) console.error(encoded.left) // "acceptForSession is not offered by this request"
 * ```
 */
export const answerFor = (request: ServerRequest, decision: Decision): Either.Either<Reply, string> =>
  (Specs[request.method] as MethodSpec<unknown>).answer(request.params, decision)

/**
 * The decision tags a known request offers a person; `Decline` is always among them.
 *
 * A command approval offers `Accept` and `AcceptForSession` only where `availableDecisions` lists
 * them (or is absent), `AcceptWithExecpolicyAmendment` where an amendment is proposed and
 * offered, `ApplyNetworkPolicyAmendment` where one is proposed, then `Decline` and `Cancel`. An
 * elicitation offers `Accept` only for a URL or a form without fields (a form needs an
 * `Elicitation` decision with content). The token refresh and attestation offer only `Decline`.
 */
export const offersFor = (request: ServerRequest): ReadonlyArray<DecisionTag> =>
  (Specs[request.method] as MethodSpec<unknown>).offers(request.params)

/**
 * The thread a decoded request belongs to, or undefined when it names none.
 *
 * For a `Known` request the method's spec says (the token refresh, attestation and the legacy v1
 * requests name no thread); for `Unknown` and `Malformed` ones, a string `params.threadId` if
 * there is one. A supervisor routes the request to that thread's worker with it.
 */
export const threadIdFor = (request: DecodedRequest): string | undefined => {
  if (request._tag === "Known") return (Specs[request.method] as MethodSpec<unknown>).threadId(request.params)
  const params = request.params
  if (typeof params === "object" && params !== null) {
    const threadId = (params as Record<string, unknown>)["threadId"]
    return typeof threadId === "string" ? threadId : undefined
  }
  return undefined
}

/**
 * The turn a decoded request belongs to, or undefined when it names none.
 *
 * Read like `threadIdFor`, from the spec or a string `params.turnId`.
 */
export const turnIdFor = (request: DecodedRequest): string | undefined => {
  if (request._tag === "Known") return (Specs[request.method] as MethodSpec<unknown>).turnId(request.params)
  const params = request.params
  if (typeof params === "object" && params !== null) {
    const turnId = (params as Record<string, unknown>)["turnId"]
    return typeof turnId === "string" ? turnId : undefined
  }
  return undefined
}
