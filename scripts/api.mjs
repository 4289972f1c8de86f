#!/usr/bin/env node
/**
 * `pnpm api`: writes docs/api.md, the public surface of every published library on one page,
 * generated from the sources: each package's `src/index.ts` names its public modules; each
 * module's exported declarations are listed with the first sentence of their TSDoc.
 *
 *   node scripts/api.mjs           write docs/api.md
 *   node scripts/api.mjs --check   exit 1 when docs/api.md is stale or a public export has no TSDoc
 *
 * Modules under `src/internal/` are not public: they appear only where a public module re-exports
 * one of their declarations (then that declaration is documented where it is written).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** The published libraries, in dependency order (the CLI's surface is its command: docs/cli.md). */
export const libraries = [
  "packages/json",
  "packages/transport",
  "packages/protocol",
  "packages/approvals",
  "packages/supervisor",
  "packages/ledger",
  "packages/inbox",
  "packages/observability",
  "packages/cluster",
  "packages/testkit"
]

const read = (file) => Fs.readFileSync(file, "utf8")

/** The TSDoc block that ends right before `index` (only whitespace between), or undefined. */
const docBefore = (text, index) => {
  const before = text.slice(0, index).replace(/\s+$/, "")
  if (!before.endsWith("*/")) return undefined
  const start = before.lastIndexOf("/**")
  if (start < 0) return undefined
  return before.slice(start)
}

const clean = (block) =>
  block
    .replace(/^\/\*\*/, "")
    .replace(/\*\/$/, "")
    .split("\n")
    .map((l) => l.replace(/^\s*\* ?/, ""))
    .join("\n")
    .trim()

/** The first sentence of a TSDoc block's first paragraph, on one line (cut at 240 characters). */
const summary = (block) => {
  const text = clean(block)
    .split(/\n\s*\n/)[0]
    .replace(/\s*\n\s*/g, " ")
    .trim()
  const cut = text.search(/[.!?](\s|$)/)
  const whole = cut >= 0 ? text.slice(0, cut + 1) : text
  const sentence = whole.length > 240 ? `${whole.slice(0, whole.lastIndexOf(" ", 239))} …` : whole
  return sentence.replace(/\|/g, "\\|")
}

const declaration =
  /^export\s+(?:declare\s+)?(?:abstract\s+)?(const|let|function\*?|async\s+function|class|interface|type|enum|namespace)\s+([A-Za-z_$][\w$]*)/gm
const reexport = /^export\s+(type\s+)?\{([^}]*)\}\s+from\s+["']([^"']+)["']/gm
const starExport = /^export\s+\*\s+as\s+([A-Za-z_$][\w$]*)\s+from\s+["']([^"']+)["']/gm

/**
 * The source file a module specifier names: a relative one (`./X.js`), or a workspace package's
 * public module (`@warden/json/JsonCensus`, `@warden/json`) through that package's `exports`,
 * which point at its sources in the workspace.
 */
const resolveModule = (fromFile, spec) => {
  const workspace = /^(@warden\/[^/]+)(\/.+)?$/.exec(spec)
  if (workspace !== null) {
    const dir = workspaceDirs().get(workspace[1])
    const target = dir && JSON.parse(read(Path.join(dir, "package.json"))).exports?.[`.${workspace[2] ?? ""}`]
    if (typeof target !== "string")
      throw new Error(`api: ${Path.relative(root, fromFile)}: cannot resolve ${spec} to a workspace source`)
    return Path.join(dir, target)
  }
  const base = Path.resolve(Path.dirname(fromFile), spec.replace(/\.js$/, ""))
  return `${base}.ts`
}

/** Every workspace package under packages/ and apps/, by name. */
const workspaceDirs = (() => {
  let dirs
  return () => {
    if (dirs !== undefined) return dirs
    dirs = new Map()
    for (const group of ["packages", "apps"]) {
      for (const name of Fs.readdirSync(Path.join(root, group))) {
        const manifest = Path.join(root, group, name, "package.json")
        if (Fs.existsSync(manifest)) dirs.set(JSON.parse(read(manifest)).name, Path.join(root, group, name))
      }
    }
    return dirs
  }
})()

/** Exported declarations of a module: name, kind, TSDoc summary (undefined when missing). */
const exportsOf = (file, seen = new Set()) => {
  if (seen.has(file)) return []
  seen.add(file)
  const text = read(file)
  const out = []
  for (const m of text.matchAll(declaration)) {
    const block = docBefore(text, m.index)
    out.push({ name: m[2], kind: m[1].replace(/\*$/, "").replace(/^async\s+/, ""), doc: block && summary(block) })
  }
  for (const m of text.matchAll(reexport)) {
    const target = resolveModule(file, m[3])
    const theirs = exportsOf(target, new Set(seen))
    const ownBlock = docBefore(text, m.index)
    for (const part of m[2]
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean)) {
      const [orig, alias] = part.replace(/^type\s+/, "").split(/\s+as\s+/)
      const found = theirs.find((e) => e.name === orig)
      out.push({
        name: alias ?? orig,
        kind: found?.kind ?? (m[1] ? "type" : "const"),
        doc: (ownBlock && summary(ownBlock)) ?? found?.doc
      })
    }
  }
  // A schema and its type share a name (`const X = Schema.Struct(...)`, `type X = typeof X.Type`):
  // one entry, documented once.
  const byName = new Map()
  for (const e of out) {
    const had = byName.get(e.name)
    if (had === undefined) byName.set(e.name, e)
    else
      byName.set(e.name, {
        ...had,
        kind: had.kind === e.kind ? had.kind : `${had.kind} + ${e.kind}`,
        doc: had.doc ?? e.doc
      })
  }
  return [...byName.values()]
}

const moduleDoc = (file) => {
  const text = read(file)
  const m = /^\s*\/\*\*[\s\S]*?\*\//.exec(text)
  return m ? summary(m[0]) : undefined
}

export const surface = () => {
  const packages = []
  for (const dir of libraries) {
    const manifest = JSON.parse(read(Path.join(root, dir, "package.json")))
    const index = Path.join(root, dir, "src", "index.ts")
    const text = read(index)
    const modules = []
    for (const m of text.matchAll(starExport)) {
      const file = resolveModule(index, m[2])
      modules.push({ name: m[1], file: Path.relative(root, file), doc: moduleDoc(file), exports: exportsOf(file) })
    }
    const direct = []
    for (const m of text.matchAll(reexport)) {
      const file = resolveModule(index, m[3])
      const theirs = exportsOf(file)
      for (const part of m[2]
        .split(",")
        .map((p) => p.trim())
        .filter(Boolean)) {
        const found = theirs.find((e) => e.name === part)
        direct.push({ name: part, kind: found?.kind ?? "const", doc: found?.doc, from: Path.relative(root, file) })
      }
    }
    // Subpath exports beside "." (e.g. @warden/protocol/SchemaDump), published ones only.
    const subpaths = Object.entries(manifest.publishConfig?.exports ?? {})
      .filter(([k]) => k !== "." && k !== "./package.json")
      .map(([k]) => {
        const file = Path.join(root, dir, "src", `${k.slice(2)}.ts`)
        return {
          name: `${manifest.name}/${k.slice(2)}`,
          file: Path.relative(root, file),
          doc: moduleDoc(file),
          exports: exportsOf(file)
        }
      })
    packages.push({ name: manifest.name, description: manifest.description, modules, direct, subpaths, dir })
  }
  return packages
}

const render = (packages) => {
  const lines = [
    "# API: the public surface of each package",
    "",
    "Generated by `pnpm api` (scripts/api.mjs) from each package's `src/index.ts` and the TSDoc of what",
    "it exports; `pnpm test` fails when this page is stale or a public export has no TSDoc. Modules under",
    "`src/internal/` are not part of the surface and are not exported by the published packages.",
    'Each package\'s modules are namespaces: `import { Supervisor } from "@warden/supervisor"`, then',
    "`Supervisor.make(...)`. Read the TSDoc in your editor for the full text, errors and examples.",
    ""
  ]
  for (const pkg of packages) {
    lines.push(`## ${pkg.name}`, "", pkg.description ?? "", "")
    const section = (title, mod) => {
      lines.push(`### ${title}`, "", `${mod.doc ?? ""} (\`${mod.file}\`)`, "")
      if (mod.exports.length === 0) return void lines.push("(types only through other modules)", "")
      lines.push("| export | kind | what it is |", "| --- | --- | --- |")
      for (const e of mod.exports) lines.push(`| \`${e.name}\` | ${e.kind} | ${e.doc ?? "**(no TSDoc)**"} |`)
      lines.push("")
    }
    for (const mod of pkg.modules) section(mod.name, mod)
    if (pkg.direct.length > 0) {
      lines.push("### Exported at the top level", "", "| export | kind | what it is |", "| --- | --- | --- |")
      for (const e of pkg.direct) lines.push(`| \`${e.name}\` | ${e.kind} | ${e.doc ?? "**(no TSDoc)**"} |`)
      lines.push("")
    }
    for (const sub of pkg.subpaths) section(`\`${sub.name}\` (a separate entry point)`, sub)
  }
  return `${lines
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()}\n`
}

export const undocumented = (packages) =>
  packages.flatMap((pkg) => [
    ...pkg.modules.flatMap((m) => [
      ...(m.doc ? [] : [`${pkg.name}: module ${m.name}`]),
      ...m.exports.filter((e) => !e.doc).map((e) => `${pkg.name}: ${m.name}.${e.name}`)
    ]),
    ...pkg.direct.filter((e) => !e.doc).map((e) => `${pkg.name}: ${e.name}`),
    ...pkg.subpaths.flatMap((m) => m.exports.filter((e) => !e.doc).map((e) => `${m.name}: ${e.name}`))
  ])

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const packages = surface()
  const text = render(packages)
  const target = Path.join(root, "docs", "api.md")
  if (process.argv.includes("--check")) {
    const missing = undocumented(packages)
    const stale = !Fs.existsSync(target) || read(target) !== text
    if (missing.length > 0)
      process.stderr.write(
        `public exports without TSDoc (${missing.length}):\n${missing.map((m) => `  ${m}`).join("\n")}\n`
      )
    if (stale) process.stderr.write("docs/api.md is stale: run `pnpm api`\n")
    process.exit(missing.length > 0 || stale ? 1 : 0)
  }
  Fs.writeFileSync(target, text)
  const missing = undocumented(packages)
  process.stdout.write(`docs/api.md: ${packages.length} packages; ${missing.length} public exports without TSDoc\n`)
  if (process.argv.includes("--list")) process.stdout.write(missing.join("\n") + "\n")
}
