/**
 * The real pinned codex against a ScriptedModel started by the test, and the `warden run` flags
 * that point it there: `--codex <native binary>`, the `-c` overrides and feature flags of the
 * RealCodex launch, `--cwd <workspace>`; CODEX_HOME (and HOME, the dummy API key) via env.
 */
import { McpServer, RealCodex, ScriptedModel } from "@warden/testkit"
import { Effect } from "effect"
import type { Scope } from "effect"

export interface Setup {
  readonly model: ScriptedModel.Service
  readonly launch: RealCodex.Launch
  /** `--codex ... -c ... --cwd ... --sandbox workspace-write` */
  readonly flags: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
}

export const setup = (
  script: ScriptedModel.ScriptInput,
  options?: { readonly mcp?: string }
): Effect.Effect<Setup, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const model = yield* ScriptedModel.make(script)
    const launch = yield* RealCodex.make({
      baseUrl: model.baseUrl,
      ...(options?.mcp !== undefined ? { mcpServers: [McpServer.registration({ name: options.mcp })] } : {})
    })
    return {
      model,
      launch,
      flags: RealCodex.wardenRunFlags(launch),
      env: launch.env
    }
  })
