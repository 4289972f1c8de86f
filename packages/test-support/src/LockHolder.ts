/**
 * Another process holding a SQLite database's write lock, as a `sqlite3` shell in a transaction,
 * a backup or a second run does, for the ledger's tests and the CLI's: `node LockHolder.script
 * FILENAME` takes the lock, says `locked` on stdout, holds it until a line `release` arrives on
 * stdin, then says `released` and exits (`lock-holder.cjs` beside this module: plain JavaScript, so
 * no TypeScript runner starts).
 */
import { fileURLToPath } from "node:url"

/** The lock holder's script, for `node` (`process.execPath`). */
export const script: string = fileURLToPath(new URL("./lock-holder.cjs", import.meta.url))
