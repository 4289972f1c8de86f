/**
 * The environment a child process of Warden gets: the one place it is decided.
 *
 * A child (`codex app-server`, and through it every command the agent runs; git for worktrees;
 * `codex generate-json-schema`) gets Warden's environment minus Warden's own secrets:
 *
 * - every variable whose name starts with `WARDEN_` (Warden's own settings and secrets, e.g.
 *   `WARDEN_NOTIFY_SECRET`: with it an agent could sign notifications of its own);
 * - every variable whose value holds a value Warden was told to withhold ({@link withhold}: the
 *   `--notify-secret` value, wherever it came from, the cluster's database URL), so a secret
 *   exported under another name (`--notify-secret "$HOOK_KEY"`) does not reach the child either.
 *
 * Everything else is passed as it is (PATH, HOME, the locale, proxies, `OPENAI_API_KEY` and
 * `CODEX_HOME`, which codex needs). {@link ChildProcessTransport} applies {@link make} to every
 * child it spawns, whatever environment it was given.
 *
 * @since 0.1.0
 */

/** Values no child's environment may hold, added by {@link withhold} (process-wide, as the environment is). */
const withheld = new Set<string>()

/** Secrets shorter than this are matched as whole values only (a short one would match inside PATH). */
const MinContained = 8

/**
 * Withhold `secret` from every child spawned from now on: a variable whose value is it (or, for a
 * secret of 8 characters or more, contains it) is left out. An empty string is ignored.
 *
 * @since 0.1.0
 */
export const withhold = (secret: string): void => {
  if (secret !== "") withheld.add(secret)
}

/** Whether a variable of this name is Warden's own (never given to a child). */
export const isWardenOwn = (name: string): boolean => name.toUpperCase().startsWith("WARDEN_")

const holdsWithheld = (value: string): boolean => {
  for (const secret of withheld) {
    if (value === secret || (secret.length >= MinContained && value.includes(secret))) return true
  }
  return false
}

/**
 * The environment a child gets from `env` (default this process's): `env` without Warden's own
 * variables and without any variable holding a withheld value. `undefined` values are left out.
 *
 * @since 0.1.0
 */
export const make = (env: Readonly<Record<string, string | undefined>> = process.env): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || isWardenOwn(name) || holdsWithheld(value)) continue
    out[name] = value
  }
  return out
}
