/**
 * The web inbox's addresses, without loading its server (RunCommand checks them before anything
 * starts): which hosts are loopback, and the origin a public URL gives the links.
 */
import { Either } from "effect"

/** Whether `host` names this machine only (127.0.0.0/8, ::1, localhost). */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)

/**
 * The origin (with any path prefix, no trailing slash) that links are built on, from a public URL:
 * `https://ci.example/warden/` gives `https://ci.example/warden`. Left: why it is not one (not
 * absolute, not http(s), has credentials, a query or a fragment).
 */
export const publicOrigin = (text: string): Either.Either<string, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left(`the inbox's public URL ${JSON.stringify(text)} is not an absolute URL`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    return Either.left(`the inbox's public URL must be http(s), got ${url.protocol}`)
  if (url.username !== "" || url.password !== "")
    return Either.left("the inbox's public URL must not carry credentials")
  if (url.search !== "" || url.hash !== "" || text.includes("?") || text.includes("#"))
    return Either.left("the inbox's public URL must not have a query or a fragment")
  return Either.right(`${url.origin}${url.pathname.replace(/\/+$/, "")}`)
}
