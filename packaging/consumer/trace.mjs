/**
 * Preloaded with `node --import` (through NODE_OPTIONS) by the outside-install test: records the
 * URL of every module the process resolves, one per line, in the file named by
 * WARDEN_TRACE_FILE, so the test can show that nothing came from the workspace's sources.
 */
import { register } from "node:module"

const file = process.env["WARDEN_TRACE_FILE"]
if (file !== undefined && file !== "") register("./trace-hooks.mjs", { parentURL: import.meta.url, data: { file } })
