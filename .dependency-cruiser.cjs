/**
 * The dependency check (`pnpm deps`, run by `pnpm test` through scripts/dependencies.mjs): the
 * layering of docs/architecture.md ("Layering"), no runtime import cycle, and where test helpers
 * may be imported from.
 *
 * Paths are the modules' real paths relative to the repository root: a workspace import such as
 * `@warden/json/JsonCensus` resolves through the package's `exports` to
 * `packages/json/src/JsonCensus.ts`, so one rule on `packages/json/` covers both the package name
 * and a relative path into it.
 */

/** The sources of a workspace package or of the CLI (tests, examples and benchmarks are not layered). */
const src = (...names) => `^(${names.map((name) => (name === "cli" ? "apps/cli" : `packages/${name}`)).join("|")})/src/`
/** Anything of these packages: their sources, tests or package.json. */
const pkg = (...names) => `^(${names.map((name) => (name === "cli" ? "apps/cli" : `packages/${name}`)).join("|")})/`

/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-runtime-cycle",
      severity: "error",
      comment:
        "A runtime import cycle: the modules' evaluation order decides what is undefined at load time. " +
        "Type-only imports (`import type`) are erased and do not count. Break it by moving the shared part " +
        "into a module both can import.",
      from: { path: "^(packages/[^/]+|apps/cli)/src/" },
      to: {
        circular: true,
        dependencyTypesNot: ["type-only"],
        viaOnly: { dependencyTypesNot: ["type-only"] }
      }
    },
    {
      name: "json-is-the-bottom",
      severity: "error",
      comment:
        "The JSON helpers (the census of a text's large objects) are pure data below everything: they import " +
        "no other Warden package. What the transport and the protocol share lives here.",
      from: { path: src("json") },
      to: { path: "^(packages|apps)/", pathNot: pkg("json") }
    },
    {
      name: "transport-is-the-bottom",
      severity: "error",
      comment:
        "The transport (pipes, framing, the child) knows no protocol and nothing above it: of Warden's packages " +
        "it imports @warden/json only.",
      from: { path: src("transport") },
      to: { path: "^(packages|apps)/", pathNot: pkg("transport", "json") }
    },
    {
      name: "protocol-is-pure-data",
      severity: "error",
      comment:
        "The protocol (classification, codecs, schemas) is pure data, testable without a pipe: it imports " +
        "neither the transport nor anything above it; of Warden's packages, @warden/json only.",
      from: { path: src("protocol") },
      to: { path: "^(packages|apps)/", pathNot: pkg("protocol", "json") }
    },
    {
      name: "approvals-below-the-engine",
      severity: "error",
      comment:
        "The approvals engine is required by the supervisor; it never imports the supervisor, the ledger or the CLI.",
      from: { path: src("approvals") },
      to: { path: pkg("supervisor", "ledger", "cli") }
    },
    {
      name: "supervisor-below-its-embedders",
      severity: "error",
      comment:
        "The supervisor is embedded by the ledger, the inbox, the cluster and the CLI, and tested with the " +
        "test kit; it imports none of them.",
      from: { path: src("supervisor") },
      to: { path: pkg("ledger", "inbox", "cluster", "cli", "testkit") }
    },
    {
      name: "inbox-without-the-cli",
      severity: "error",
      comment: "The web inbox is a library an embedder serves from its own supervisor: it imports nothing of the CLI.",
      from: { path: src("inbox") },
      to: { path: pkg("cli") }
    },
    {
      name: "workspace-imports-resolve",
      severity: "error",
      comment:
        "An import of a workspace package that does not resolve to a file cannot be checked against the " +
        "layering (tsc -b fails on it too): the package's package.json must export it.",
      from: { path: "^(packages/[^/]+|apps/cli)/src/" },
      to: { couldNotResolve: true, path: "^@warden/" }
    },
    {
      name: "no-test-support-in-src",
      severity: "error",
      comment:
        "@warden/test-support holds the helpers this repository's tests share; it is never published, so a " +
        "package's sources (published, or the CLI) never import it. Something an embedder tests with belongs " +
        "in @warden/testkit.",
      from: { path: "^(packages/[^/]+|apps/cli)/src/", pathNot: "^packages/test-support/" },
      to: { path: "^packages/test-support/" }
    },
    {
      name: "no-test-folder-imports",
      severity: "error",
      comment:
        "A package's test folder is its own (the CLI's, the benchmarks', the examples' and the packaging " +
        "tests' too): what another package's tests need from it moves to @warden/test-support " +
        "(packages/test-support), which every test may import.",
      from: { path: "^(packages/[^/]+|apps/cli|bench|examples|packaging)/" },
      to: { path: "^((packages/[^/]+|apps/cli|examples|packaging)/test|bench)/", pathNot: "^$1/" }
    },
    {
      name: "no-foreign-internal",
      severity: "error",
      comment:
        "A package's src/internal is its own: another package (or the CLI) uses its public modules, the ones " +
        "its package.json exports. Sources only: tests, benchmarks and examples are not layered.",
      from: { path: "^(packages/([^/]+)|apps/cli)/src/" },
      to: { path: "^packages/[^/]+/src/internal/", pathNot: "^packages/$2/" }
    }
  ],
  options: {
    // The workspace's own modules (an unresolved `@warden/...` import is kept, for the rule above).
    includeOnly: "^((packages/[^/]+|apps/cli|bench|examples|packaging)/|@warden/)",
    exclude: { path: "(^|/)(node_modules|dist|build)/" },
    doNotFollow: { path: "node_modules" },
    // `import type` is kept and marked "type-only": the layering counts it, the cycle rule does not.
    tsPreCompilationDeps: true,
    // Whatever a module's dependency is, it is recorded under its real path (workspace links followed).
    preserveSymlinks: false,
    // The sources import `./Card.js` and mean `./Card.ts` (NodeNext resolution): dependency-cruiser
    // tries the .ts file when the .js one does not exist.
    enhancedResolveOptions: {
      // The workspace packages export their TypeScript sources under the plain `import` condition.
      conditionNames: ["import", "types", "node", "default"],
      exportsFields: ["exports"],
      mainFields: ["module", "main", "types"],
      extensions: [".ts", ".js", ".mjs", ".cjs", ".json"]
    },
    skipAnalysisNotInRules: true,
    reporterOptions: { text: { highlightFocused: true } }
  }
}
