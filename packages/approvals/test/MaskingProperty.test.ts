/**
 * Masking property: a secret of any common shape, carried in any of the ways a hostile app-server
 * or model can carry it, never survives the masking Warden applies at its exits, and masking does
 * not eat the ordinary words around it.
 *
 * Shapes: env assignments, HTTP headers, URLs with userinfo, argv flags and the password forms of
 * common programs (`mysql -pX`, `curl -u user:X`, `sshpass -p X`, `htpasswd -b f u X`, ...), JSON keys,
 * nested quotes (`"'X'"`, `\"X\"`), tokens with known prefixes (sk-, ghp_, xox, AKIA, JWTs).
 * Carriers: a command line (bare and in codex's `/bin/bash -lc '...'`), an argv, a JSON tool-argument
 * object nested a few levels, a multi-line stderr tail, a log line, a file diff, JSON text of any of
 * those. Exits: `maskText`, `maskArgv`, `maskRecord`, `maskJson`, `CardSummary.summarize` of a card
 * carrying it, and `maskJson` (what the CLI's --json lines and the audit trail apply).
 *
 * Asynchronous and yielding (as the other property files): a case never holds vitest's worker long.
 */
import { assert, describe, it } from "@effect/vitest"
import { yieldNow } from "@warden/test-support/EventLoop"
import { FastCheck as fc } from "effect"
import { fileChangesOf } from "../src/Card.js"
import * as CardSummary from "../src/internal/CardSummary.js"
import * as SecretMask from "../src/SecretMask.js"
import { quote } from "../src/ShellCommand.js"
import { known } from "./Captured.js"

const { Mask, maskArgv, maskJson, maskRecord, maskText } = SecretMask

// ---------------------------------------------------------------------------------------------
// Secrets

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
const chars = (alphabet: string, min: number, max: number) =>
  fc.array(fc.constantFrom(...alphabet), { minLength: min, maxLength: max }).map((a) => a.join(""))

/**
 * A password: starts with a letter or digit, has a digit (so it is never an ordinary word the
 * carrier holds), then letters, digits and punctuation a shell word keeps (no blanks, quotes,
 * `/`, `,`, `&`, `;`, `|`, `)`, `$`, which end or change a word or a URL's userinfo).
 */
const password = fc
  .tuple(chars(alnum, 1, 1), chars(`${alnum}_.+~^*!@%=:-`, 6, 22), chars("0123456789", 1, 1))
  .map(([a, b, c]) => `${a}${b}${c}`)

/** Token-like (what may follow `Bearer`): base64url and dots. */
const token = fc.tuple(chars(alnum, 8, 30), chars("0123456789", 1, 2)).map(([a, b]) => `${a}${b}`)

/** Tokens with known prefixes, masked by their shape wherever they are. */
const prefixed = fc.oneof(
  chars(alnum, 24, 40).map((b) => `sk-proj-${b}`),
  chars(alnum, 24, 40).map((b) => `sk-${b}`),
  chars(alnum, 36, 36).map((b) => `ghp_${b}`),
  chars(alnum, 30, 40).map((b) => `github_pat_${b}`),
  fc.tuple(chars("0123456789", 10, 12), chars(alnum, 12, 24)).map(([a, b]) => `xoxb-${a}-${b}`),
  chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 16).map((b) => `AKIA${b}`),
  fc
    .tuple(chars(`${alnum}_-`, 10, 40), chars(`${alnum}_-`, 10, 60), chars(`${alnum}_-`, 20, 43))
    .map(([h, p, s]) => `eyJ${h}.eyJ${p}.${s}`),
  chars(alnum, 20, 30).map((b) => `glpat-${b}`),
  chars(alnum, 36, 36).map((b) => `npm_${b}`)
)

// ---------------------------------------------------------------------------------------------
// Shapes: how a secret sits in a line

interface Shape {
  readonly name: string
  /** The line carrying the secret. */
  readonly line: (secret: string) => string
  /** The same as an argv, when it is a command. */
  readonly argv?: (secret: string) => ReadonlyArray<string>
  /** The same as structured JSON (a value under a key, a header map), when it has such a form. */
  readonly value?: (secret: string) => unknown
  /** "line": the shape masks to the end of its line (a header), or its last word is the secret (`htpasswd -b`). */
  readonly tail?: "line"
}

const words = (line: string): ReadonlyArray<string> => line.split(" ")
const command = (name: string, line: (s: string) => string, tail?: "line"): Shape => ({
  name,
  line,
  argv: (s) => words(line(s)),
  ...(tail ? { tail } : {})
})

const EnvKeys = [
  "PASSWORD",
  "DB_PASSWORD",
  "API_KEY",
  "GITHUB_TOKEN",
  "AWS_SECRET_ACCESS_KEY",
  "PGPASSWORD",
  "SSHPASS",
  "MYSQL_PWD",
  "CLIENT_SECRET",
  "REDISCLI_AUTH"
]
const JsonKeys = [
  "password",
  "client_secret",
  "apiKey",
  "access_token",
  "Authorization",
  "x-api-key",
  "private_key",
  "sessionId",
  "passphrase"
]

const passwordShapes: ReadonlyArray<Shape> = [
  // env assignments
  ...EnvKeys.map(
    (key): Shape => ({
      name: `env ${key}`,
      line: (s) => `${key}=${s} run`,
      argv: (s) => ["env", `${key}=${s}`, "run"],
      value: (s) => ({ env: { [key]: s } })
    })
  ),
  { name: "export, quoted", line: (s) => `export DB_PASSWORD="${s}"` },
  { name: "export, nested quotes", line: (s) => `export DB_PASSWORD="'${s}'"` },
  { name: "single in double", line: (s) => `bash -c "PASSWORD='${s}' deploy"` },
  // HTTP headers
  {
    name: "Authorization header",
    line: (s) => `Authorization: Basic ${s}`,
    tail: "line",
    value: (s) => ({ headers: { Authorization: `Basic ${s}` } })
  },
  {
    name: "Cookie header",
    line: (s) => `Cookie: session=${s}`,
    tail: "line",
    value: (s) => ({ headers: { Cookie: `session=${s}` } })
  },
  { name: "X-Api-Key header", line: (s) => `X-Api-Key: ${s}`, tail: "line" },
  {
    name: "curl -H",
    line: (s) => `curl -H 'Authorization: Token ${s}' https://api.example.com`,
    argv: (s) => ["curl", "-H", `Authorization: Token ${s}`, "https://api.example.com"]
  },
  // URLs with userinfo
  {
    name: "URL password",
    line: (s) => `git push https://deploy:${s}@git.example.com/repo.git`,
    value: (s) => ({ remote: `https://deploy:${s}@git.example.com/repo.git` })
  },
  { name: "postgres URL", line: (s) => `psql postgresql://app:${s}@db.internal:5432/app` },
  { name: "redis URL", line: (s) => `redis-cli -u redis://:${s}@cache:6379` },
  // argv flags, generic and each program's own form
  command("--password", (s) => `deploy --password ${s} --verbose`),
  command("--password=", (s) => `deploy --password=${s} --verbose`),
  command("--token", (s) => `gh api --token ${s} user`),
  command("--api-key=", (s) => `tool --api-key=${s} run`),
  command("mysql -p", (s) => `mysql -u root -p${s} app`),
  command("mysqldump --password=", (s) => `mysqldump --password=${s} app`),
  command("curl -u", (s) => `curl -u admin:${s} https://example.com`),
  command("curl --user", (s) => `curl --user admin:${s} https://example.com`),
  command("sshpass -p", (s) => `sshpass -p ${s} ssh host`),
  command("docker login -p", (s) => `docker login -u me -p ${s} registry.example.com`),
  command("docker login --password", (s) => `docker login --password ${s} registry.example.com`),
  command("redis-cli -a", (s) => `redis-cli -a ${s} ping`),
  command("openssl -k", (s) => `openssl enc -aes-256-cbc -k ${s} -in plain`),
  command("openssl -pass pass:", (s) => `openssl enc -aes-256-cbc -pass pass:${s} -in plain`),
  command("aws configure set", (s) => `aws configure set aws_secret_access_key ${s}`, "line"),
  command("htpasswd -b", (s) => `htpasswd -b /etc/nginx/htpasswd admin ${s}`, "line"),
  command("git config", (s) => `git config --global user.password ${s}`, "line"),
  command("keytool -storepass", (s) => `keytool -list -storepass ${s} -v`),
  command("smbclient -U", (s) => `smbclient //host/share -U admin%${s}`),
  command("ldapsearch -w", (s) => `ldapsearch -x -w ${s} -b dc=example`),
  command("mongosh -p", (s) => `mongosh -u app -p ${s} --quiet`),
  command("docker exec mysql", (s) => `docker exec -it db mysql -uroot -p${s} app`),
  // JSON keys
  ...JsonKeys.map(
    (key): Shape => ({
      name: `json ${key}`,
      line: (s) => `{"${key}": "${s}", "user": "ann"}`,
      value: (s) => ({ level: { [key]: s } })
    })
  ),
  { name: "json, nested quotes", line: (s) => `{"password": "'${s}'"}` },
  { name: "json in json", line: (s) => JSON.stringify({ body: JSON.stringify({ password: s }) }) },
  { name: "yaml", line: (s) => `password: ${s}` }
]

const tokenShapes: ReadonlyArray<Shape> = [
  { name: "Bearer", line: (s) => `Bearer ${s}` },
  { name: "Bearer, quoted", line: (s) => `curl -H "Authorization: Bearer \\"${s}\\""`, tail: "line" },
  { name: "token in URL user", line: (s) => `git clone https://${s}Ab123456789@dev.example.com/org/repo` }
]

const prefixedShapes: ReadonlyArray<Shape> = [
  { name: "bare", line: (s) => `using ${s} now` },
  { name: "argv", line: (s) => `tool ${s} run`, argv: (s) => ["tool", s, "run"], value: (s) => ({ list: ["a", s] }) },
  { name: "assignment", line: (s) => `OPENAI_API_KEY=${s}`, value: (s) => ({ note: `key is ${s}` }) },
  { name: "header", line: (s) => `Authorization: Bearer ${s}`, tail: "line" },
  { name: "quoted", line: (s) => `echo "'${s}'"` }
]

// ---------------------------------------------------------------------------------------------
// Carriers: how a line reaches Warden

/** Ordinary words that must survive masking around a secret. */
const plainWord = fc.constantFrom(
  "alpha",
  "bravo",
  "charlie",
  "delta",
  "echo",
  "foxtrot",
  "golf",
  "hotel",
  "india",
  "juliet"
)

interface Case {
  readonly shape: Shape
  readonly secret: string
  readonly before: string
  readonly after: string
}

/** The line with a plain word before it and after it (on its own line when the shape takes the rest of its line). */
const framed = ({ after, before, secret, shape }: Case): string =>
  `${before} ${shape.line(secret)}${shape.tail === "line" ? "\n" : " "}${after}`

/** Text carriers of a line. */
const textCarriers = (line: string): ReadonlyArray<readonly [string, string]> => [
  ["command", line],
  ["codex wrapper", `/bin/bash -lc ${quote(line)}`],
  ["stderr tail", `warning: retrying\n${line}\nerror: exit status 1`],
  ["log line", `2025-01-01T00:00:00Z INFO request ${line} (12 ms)`],
  ["diff", `@@ -1,2 +1,2 @@\n-old = 1\n+${line}\n context`],
  ["json text", JSON.stringify({ args: { cmd: line } })]
]

const ids = { threadId: "t", turnId: "u", itemId: "i" }

/** Cards carrying the line (as a command, a reason, tool arguments nested a few levels, a diff, an argv). */
const cards = (line: string, argv: ReadonlyArray<string> | undefined) => {
  const diffItem = {
    type: "fileChange",
    id: "i",
    changes: [{ path: "/repo/a.env", kind: { type: "add" }, diff: `+${line}\n` }]
  }
  return [
    CardSummary.summarize(
      known("item/commandExecution/requestApproval", {
        ...ids,
        command: `/bin/bash -lc ${quote(line)}`,
        cwd: "/repo",
        reason: line
      }),
      {}
    ),
    CardSummary.summarize(
      known("item/tool/call", {
        ...ids,
        callId: "c",
        tool: "t",
        namespace: null,
        arguments: { a: { b: [{ command: line }] } }
      }),
      {}
    ),
    CardSummary.summarize(known("item/fileChange/requestApproval", { ...ids, reason: line }), {
      fileChanges: fileChangesOf(diffItem)
    }),
    CardSummary.summarize(
      known("execCommandApproval", {
        conversationId: "c",
        callId: "x",
        command: argv ?? ["bash", "-lc", line],
        cwd: "/repo",
        reason: null
      }),
      {}
    )
  ]
}

// ---------------------------------------------------------------------------------------------
// The property

/** Every exit of a case: [where, what it wrote]. */
const exits = (c: Case): ReadonlyArray<readonly [string, string]> => {
  const line = framed(c)
  const out: Array<readonly [string, string]> = []
  for (const [carrier, text] of textCarriers(line)) {
    out.push([`maskText(${carrier})`, maskText(text)])
    out.push([`maskShown(${carrier})`, SecretMask.maskShown(text, 2_000)])
    out.push([`maskJson(${carrier})`, JSON.stringify(maskJson({ stderrTail: text, nested: [{ text }] }))])
  }
  const argv = c.shape.argv?.(c.secret)
  out.push(["maskArgv(bash -lc)", JSON.stringify(maskArgv(["/bin/bash", "-lc", line]))])
  // (a shape whose last word is the secret ends its argv)
  if (argv !== undefined)
    out.push(["maskArgv", JSON.stringify(maskArgv([c.before, ...argv, ...(c.shape.tail === "line" ? [] : [c.after])]))])
  const record = {
    tool: "t",
    arguments: { level1: { level2: [{ level3: line }] } },
    ...(c.shape.value ? { value: c.shape.value(c.secret) } : {})
  }
  out.push(["maskRecord", JSON.stringify(maskRecord(record))])
  out.push(["maskJson", JSON.stringify(maskJson(record))])
  for (const card of cards(line, argv)) {
    out.push(["summarize", JSON.stringify(card)])
    out.push(["summarize + maskJson", JSON.stringify(maskJson(card))])
  }
  return out
}

const caseOf = (shapes: ReadonlyArray<Shape>, secret: fc.Arbitrary<string>): fc.Arbitrary<Case> =>
  fc.record({ shape: fc.constantFrom(...shapes), secret, before: plainWord, after: plainWord })

const check = (c: Case): void => {
  for (const [where, written] of exits(c)) {
    assert.notInclude(written, c.secret, `${c.shape.name}: the secret survived ${where}: ${written.slice(0, 300)}`)
  }
  // masking does not eat the ordinary text around it
  for (const [carrier, text] of textCarriers(framed(c))) {
    const masked = maskText(text)
    assert.include(masked, c.before, `${c.shape.name}: the word before was eaten in ${carrier}: ${masked}`)
    assert.include(masked, c.after, `${c.shape.name}: the word after was eaten in ${carrier}: ${masked}`)
    assert.include(masked, Mask, `${c.shape.name}: nothing was masked in ${carrier}`)
  }
}

const property = (name: string, arbitrary: fc.Arbitrary<Case>, numRuns: number) =>
  it(name, async () => {
    await fc.assert(
      fc.asyncProperty(arbitrary, async (c) => {
        await yieldNow()
        check(c)
      }),
      { numRuns }
    )
  }, 60_000)

describe("masking property: no secret survives an exit, and the words around it stay", () => {
  it("every shape, once, with a plain secret of its kind", async () => {
    const fixed: ReadonlyArray<readonly [ReadonlyArray<Shape>, ReadonlyArray<string>]> = [
      [passwordShapes, ["hunter2hunter2", "p@ss=w:rd-42", "Zq9.x+y~z^*!3"]],
      [tokenShapes, ["abcdefgh12345678"]],
      [
        prefixedShapes,
        ["sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2m3N4", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "AKIAIOSFODNN7EXAMPLE"]
      ]
    ]
    for (const [shapes, secrets] of fixed) {
      for (const shape of shapes) {
        for (const secret of secrets) {
          await yieldNow()
          check({ shape, secret, before: "alpha", after: "omega" })
        }
      }
    }
    assert.isAbove(passwordShapes.length + tokenShapes.length + prefixedShapes.length, 60)
  })

  property(
    "passwords in env assignments, headers, URLs, argv flags and program forms, JSON keys, nested quotes",
    caseOf(passwordShapes, password),
    300
  )
  property("tokens after Bearer, in quotes, as a URL's user", caseOf(tokenShapes, token), 100)
  property(
    "tokens with known prefixes (sk-, ghp_, github_pat_, xox, AKIA, JWTs, glpat-, npm_) in any carrier",
    caseOf(prefixedShapes, prefixed),
    150
  )
})
