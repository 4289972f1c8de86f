/**
 * Signed single-use decision links and signed notifications for the web inbox.
 *
 * A link (`/l/CARD/DECISION/EXPIRES/NONCE/SIG`) carries an HMAC-SHA256 (a key made at start, never
 * shown) over the card, the decision (`accept` or `decline`), its expiry (the card's deadline) and a
 * random nonce. Opening it (`GET`) shows a confirmation page and decides nothing (link previewers
 * fetch links); its button `POST`s the same path, which decides once: a used or expired link
 * answers 410 and decides nothing, a link whose signature does not verify answers 401 (only the
 * canonical encoding verifies: base64url without padding, the expiry without leading zeros).
 *
 * A notification is a JSON `POST` to each `--notify` URL when a card opens, signed with
 * HMAC-SHA256 over the body (`X-Warden-Signature: sha256=HEX`, the secret from `--notify-secret`
 * or `WARDEN_NOTIFY_SECRET`), carrying the card (masked) and its links. A delivery that fails is
 * reported and retried with backoff until the card settles or its deadline passes; it never decides
 * the card.
 */
import * as Crypto from "node:crypto"

/** The decisions a link can carry. */
export type LinkDecision = "accept" | "decline"

/** One link's parts. */
export interface LinkParts {
  readonly cardId: string
  readonly decision: LinkDecision
  readonly expiresAt: number
  readonly nonce: string
}

const mac = (key: Buffer | string, text: string) => Crypto.createHmac("sha256", key).update(text, "utf8").digest()

const payload = (p: LinkParts) => `${p.cardId}\n${p.decision}\n${p.expiresAt}\n${p.nonce}`

/** What a link check found. */
export type LinkCheck =
  | { readonly _tag: "Valid"; readonly parts: LinkParts }
  | { readonly _tag: "Forged" }
  | { readonly _tag: "Gone"; readonly why: "used" | "expired" }

/** Makes and checks links with one key; remembers the nonces used (single use). */
export interface Signer {
  /** The path of a new link (`/l/...`). */
  readonly path: (cardId: string, decision: LinkDecision, expiresAt: number) => string
  /** Checks a path's parts; `use` marks a valid link used (it answers `Gone` from then on). */
  readonly check: (segments: ReadonlyArray<string>, now: number, use: boolean) => LinkCheck
}

/** A signer with `key` (a random one when omitted). */
export const makeSigner = (key: Buffer = Crypto.randomBytes(32)): Signer => {
  const used = new Set<string>()
  const sign = (p: LinkParts) => mac(key, payload(p)).toString("base64url")
  return {
    path: (cardId, decision, expiresAt) => {
      const parts = { cardId, decision, expiresAt, nonce: Crypto.randomBytes(16).toString("base64url") }
      return `/l/${encodeURIComponent(cardId)}/${decision}/${expiresAt}/${parts.nonce}/${sign(parts)}`
    },
    check: (segments, now, use) => {
      const [cardId, decision, expires, nonce, signature] = segments
      if (
        segments.length !== 5 ||
        (decision !== "accept" && decision !== "decline") ||
        !/^\d+$/.test(expires ?? "") ||
        !nonce ||
        !signature
      ) {
        return { _tag: "Forged" }
      }
      const parts: LinkParts = { cardId: cardId!, decision, expiresAt: Number(expires), nonce }
      // Canonical encodings only: Node's base64url decoder takes padding, the base64 alphabet and
      // spare bits, and a leading zero leaves the expiry's number the same; each would verify too.
      if (String(parts.expiresAt) !== expires) return { _tag: "Forged" }
      const expected = mac(key, payload(parts))
      const given = Buffer.from(signature, "base64url")
      if (
        given.length !== expected.length ||
        given.toString("base64url") !== signature ||
        !Crypto.timingSafeEqual(given, expected)
      ) {
        return { _tag: "Forged" }
      }
      if (used.has(nonce)) return { _tag: "Gone", why: "used" }
      if (now >= parts.expiresAt) return { _tag: "Gone", why: "expired" }
      if (use) used.add(nonce)
      return { _tag: "Valid", parts }
    }
  }
}

/** `sha256=HEX` of HMAC-SHA256(secret, body): the `X-Warden-Signature` header of a notification. */
export const signatureOf = (secret: string, body: string): string => `sha256=${mac(secret, body).toString("hex")}`

/** Backoff before delivery attempt `attempt` (1-based): 500 ms doubling, at most 30 s. */
export const backoffMs = (attempt: number): number => Math.min(30_000, 500 * 2 ** Math.max(0, attempt - 1))

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** The page a link shows: a question with one button (GET), or what happened (POST). */
export const page = (title: string, text: string, button?: string): string => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}p.card{font-family:ui-monospace,monospace;white-space:pre-wrap}button{font:inherit;padding:.4rem 1.2rem}</style>
</head><body><h1>${escapeHtml(title)}</h1><p class="card">${escapeHtml(text)}</p>
${button === undefined ? "" : `<form method="post"><button type="submit">${escapeHtml(button)}</button></form>`}
</body></html>
`

/** Headers of a link's page (a form may post to this origin only). */
export const pageHeaders = {
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}
