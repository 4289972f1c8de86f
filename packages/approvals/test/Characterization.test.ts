/**
 * What masking and command reading answer, pinned: a corpus of command-like lines (programs and
 * their password forms, quotes of every kind, codex's `'\''`, operators, substitutions,
 * here-documents, wrappers, runners, prose with apostrophes, JSON text, secrets) generated from a
 * fixed seed, run through every reader of shell words (`SecretMask.maskText`, `maskShown`,
 * `maskArgv`, `looksSecret`; `ShellCommand.unwrap`, `commands`, `segments`, `commandStarts`; the
 * rules and a card's summary on top of them), and each reader's answers hashed together.
 *
 * The digests were recorded before the shell lexer was shared by masking and command analysis and
 * the two modules moved under `src/internal/`: a reader that answers one line differently changes
 * its digest. When a change of behaviour is meant, record the new digests here and say why in the
 * commit; `WARDEN_CORPUS_DUMP=FILE` writes every answer to FILE to compare two versions line by
 * line.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { macrotask } from "@warden/test-support/EventLoop"
import { Either } from "effect"
import { createHash } from "node:crypto"
import { writeFileSync } from "node:fs"
import * as CardSummary from "../src/internal/CardSummary.js"
import * as Policy from "../src/Policy.js"
import * as SecretMask from "../src/SecretMask.js"
import * as ShellCommand from "../src/ShellCommand.js"
import { known } from "./Captured.js"

/** A small deterministic generator (mulberry32): the corpus depends on nothing but this file. */
const generator = (seed: number) => {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number): number => Math.floor(next() * n)
  const pick = <A>(list: ReadonlyArray<A>): A => list[int(list.length)]!
  return { next, int, pick }
}

const Programs = [
  "mysql",
  "/usr/bin/mysql",
  "mysqldump",
  "mariadb",
  "7z",
  "sshpass",
  "docker",
  "podman",
  "redis-cli",
  "openssl",
  "mongosh",
  "sqlcmd",
  "ldapsearch",
  "ldappasswd",
  "zip",
  "curl",
  "smbclient",
  "lftp",
  "htpasswd",
  "xfreerdp",
  "gh",
  "aws",
  "git",
  "npm",
  "kubectl",
  "vault",
  "keytool",
  "psql",
  "echo",
  "cat",
  "ls",
  "rm",
  "/bin/rm",
  "grep",
  "python",
  "node",
  "make",
  "pnpm"
]
const Runners = [
  "sudo",
  "sudo -u root",
  "env",
  "env -i",
  "env -S",
  "env --split-string=",
  "nohup",
  "timeout 5",
  "timeout -s KILL 5",
  "xargs",
  "xargs -I R",
  "nice -n 19",
  "time",
  "exec",
  "command",
  "chroot /x",
  "flock f -c",
  "su -c",
  "su root --command=",
  "runuser -c",
  "watch",
  "ssh host",
  "ssh -o ProxyCommand=",
  "tmux new-session",
  "eval",
  "find . -exec",
  "fd -x",
  "trap",
  "alias a=",
  "coproc",
  "script -c",
  "fish -c",
  "sg wheel"
]
const Shells = [
  "bash",
  "/bin/bash",
  "sh",
  "/bin/sh",
  "zsh",
  "dash",
  "/usr/local/bin/bash",
  "/tmp/bash",
  "bash5",
  "ksh",
  "fish",
  "csh"
]
const ShellFlags = [
  "-c",
  "-lc",
  "-cl",
  "--login -c",
  "-l -c",
  "-o errexit -c",
  "-O extglob -c",
  "--rcfile f -c",
  "-oerrexit -c",
  "-c --",
  "-e -c",
  "-x"
]
const Options = [
  "-p",
  "-phunter2",
  "-p'hunter 2'",
  '-p"hunter 2"',
  "-p=hunter2",
  "--password",
  "--password=hunter2",
  "--password hunter2",
  "-u",
  "-uadmin:hunter2",
  "--user=admin:hunter2",
  "-U",
  "-a",
  "-k",
  "-K",
  "-P",
  "-w",
  "-s",
  "-b",
  "-nbB",
  "--body",
  "-passin",
  "-storepass",
  "-keypass",
  "/p:hunter2",
  "-x",
  "--token",
  "--api-key",
  "--pw",
  "-h",
  "-i",
  "-r",
  "-v",
  "--",
  "-",
  "--global",
  "-it",
  "-e",
  "--host=db",
  "-o",
  "-n"
]
const Words = [
  "admin:hunter2",
  "user%hunter2",
  "user,hunter2",
  "hunter2",
  "hunter3",
  "db",
  "app",
  "root",
  "login",
  "passwd",
  "set",
  "config",
  "configure",
  "secret",
  "enc",
  "rsa",
  "-6",
  "user.password",
  "aws_secret_access_key",
  "region",
  "us-east-1",
  "//registry.npmjs.org/:_authToken",
  "NAME",
  "/etc/htpasswd",
  "file",
  "https://x",
  "https://user:pa55w0rd@host/x",
  "https://abcdefghij1234567890@dev.azure.com/o",
  "registry.io",
  "status",
  "--short",
  "log",
  "push",
  "origin",
  "main",
  "build",
  "-rf",
  "{}",
  "+",
  "\\;",
  "dir",
  "a.zip",
  "f",
  "ping",
  "x",
  "1",
  "2",
  "3"
]
const Secrets = [
  "sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2m3N4",
  "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
  "xoxb-1234567890-abcdefghij",
  "AKIAIOSFODNN7EXAMPLE",
  "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  "Zx9Qm2Lp7Rt4Vw8Ks3Nd6Hf1Jb5",
  "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
  "Bearer abcdefgh12345678",
  "Authorization: Basic dXNlcjpwYXNz",
  "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----"
]
const Assignments = [
  "PASSWORD=hunter2",
  "DB_PASSWORD='hunter 2'",
  'TOKEN="abc123def"',
  "A=1",
  "X=$Y",
  "KEY=$(cat k)",
  "SSHPASS=hunter2",
  "api_key: abc123",
  "token=abc123",
  '"password": "hunter2"',
  '{\\"password\\": \\"hunter2\\"}'
]
const Operators = [
  ";",
  "&&",
  "||",
  "|",
  "&",
  "\n",
  ";;",
  "|&",
  ">",
  ">>",
  "2>&1",
  "&>",
  "<",
  "<<EOF",
  "<<-EOF",
  "<<<",
  "<(",
  ">(",
  "$(",
  "`",
  ")",
  "(",
  "{",
  "}",
  "!",
  "#",
  "\\\n"
]
const Prose = [
  "it's",
  "don't",
  "I'll",
  "run",
  "the",
  "password",
  "for",
  "and",
  "that's",
  "token",
  "key",
  "please",
  "use",
  "here",
  "note:",
  "question:",
  "value",
  '"quoted',
  'words"',
  "'single",
  "quote'"
]
const Quoted = [
  "'a b'",
  '"a b"',
  "'\\''",
  "'\\''hunter 2'\\''",
  '\\"x\\"',
  "$'a\\'b'",
  '"$(echo hi)"',
  '"`id`"',
  "'",
  '"',
  "`",
  "\\",
  "~",
  "*.ts",
  "[ab]",
  "{a,b}",
  "$HOME",
  "${X}",
  "EOF"
]
const Blanks = [" ", " ", " ", " ", "  ", "\t", "", "\n"]

/** One line: fragments of every kind joined by blanks (or nothing), sometimes wrapped as codex wraps, or as JSON text. */
const line = (g: ReturnType<typeof generator>): string => {
  const parts: Array<string> = []
  const n = 1 + g.int(14)
  for (let i = 0; i < n; i++) {
    const r = g.next()
    const fragment =
      r < 0.16
        ? g.pick(Programs)
        : r < 0.32
          ? g.pick(Options)
          : r < 0.46
            ? g.pick(Words)
            : r < 0.52
              ? g.pick(Secrets)
              : r < 0.58
                ? g.pick(Assignments)
                : r < 0.68
                  ? g.pick(Operators)
                  : r < 0.74
                    ? g.pick(Runners)
                    : r < 0.78
                      ? `${g.pick(Shells)} ${g.pick(ShellFlags)}`
                      : r < 0.88
                        ? g.pick(Prose)
                        : g.pick(Quoted)
    parts.push(fragment, g.pick(Blanks))
  }
  let text = parts.join("").trim()
  // Nesting now and then: scripts in scripts, and past `MaxDepth` or the reading budget (incomplete).
  const deep = g.next()
  if (deep < 0.03) for (let i = 2 + g.int(3); i > 0; i--) text = `${g.pick(Shells)} -c ${ShellCommand.quote(text)}`
  else if (deep < 0.06) for (let i = 5 + g.int(8); i > 0; i--) text = `echo $(${text})`
  else if (deep < 0.08) text = `${g.pick(["", "sudo ", "env "])}${"eval ".repeat(2 + g.int(60))}${text}`
  const wrap = g.next()
  if (wrap < 0.15) return `/bin/bash -lc '${text.replaceAll("'", "'\\''")}'`
  if (wrap < 0.22) return `${g.pick(Shells)} ${g.pick(ShellFlags)} ${ShellCommand.quote(text)}`
  if (wrap < 0.27) return JSON.stringify({ command: text })
  if (wrap < 0.3) return JSON.stringify(text)
  return text
}

const Lines = (() => {
  const g = generator(20_260_101)
  return Array.from({ length: 3_000 }, () => line(g))
})()

/** The words of a line as an argv (split at blanks, as a test author would), for the argv readers. */
const argvOf = (text: string): ReadonlyArray<string> => text.split(/[ \t\n]+/).filter((w) => w.length > 0)

const ids = { threadId: "t1", turnId: "u1", itemId: "i1" }
const commandRequest = (command: string) =>
  known("item/commandExecution/requestApproval", { ...ids, command, cwd: "/work/repo" })
const argvRequest = (argv: ReadonlyArray<string>) =>
  known("execCommandApproval", { conversationId: "t1", callId: "c1", command: argv, cwd: "/work/repo", parsedCmd: [] })

const decoded = Policy.decodeRules({
  rules: [
    { id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } },
    { id: "no-curl", effect: "deny", match: { command: { argvPrefix: ["curl"] } } },
    { id: "no-push", effect: "deny", match: { command: { argvPrefix: ["git", "push"] } } },
    { id: "git-status", effect: "allow", match: { command: { argvPrefix: ["git", "status"] } } },
    { id: "echo", effect: "allow", match: { command: { argvPrefix: ["echo"] } } },
    { id: "mysql", effect: "allow", match: { command: { argvPrefix: ["mysql"] } } }
  ]
})
if (Either.isLeft(decoded)) throw new Error(decoded.left)
const rules = decoded.right

/** Each reader's answers, one JSON line per corpus line. */
const Readers: Record<string, (text: string) => unknown> = {
  maskText: (text) => SecretMask.maskText(text),
  maskShown: (text) => [SecretMask.maskShown(text, 24), SecretMask.maskShown(text, 80)],
  looksSecret: (text) => [SecretMask.looksSecret(text), SecretMask.looksSecretShown(text, 16)],
  maskArgv: (text) => SecretMask.maskArgv(argvOf(text)),
  unwrap: (text) => ShellCommand.unwrap(text),
  commands: (text) => {
    const found = ShellCommand.commands(text)
    return { starts: found.starts.map((s) => s.words.slice(s.at)), complete: found.complete, work: found.work }
  },
  segments: (text) => ShellCommand.segments(text),
  commandStarts: (text) => ShellCommand.commandStarts(argvOf(text)),
  join: (text) => ShellCommand.join(argvOf(text)),
  evaluate: (text) => [
    Policy.evaluate(rules, commandRequest(text), {}),
    Policy.evaluate(rules, argvRequest(argvOf(text)), {})
  ],
  summary: (text) => {
    const { summary, title } = CardSummary.summarize(commandRequest(text), {})
    const byArgv = CardSummary.summarize(argvRequest(argvOf(text)), {})
    return [summary, title, byArgv.summary, byArgv.title]
  }
}

/**
 * The digests recorded before the move (SHA-256 of each reader's answers, in corpus order). A
 * change here is a change of what Warden masks or how it reads a command: say why in the commit.
 */
const Recorded: Record<string, string> = {
  maskText: "727354d13c5c7ad0e1304dbf400a37790c40f8616e272a990aa0697acdb0e688",
  maskShown: "bbfb84b4c2c6fcddcfc384cd8fd94dcdc87decadba728bef93a1d19c233a6449",
  looksSecret: "f8385cf5253fb57e14bb4a642e19738427d129c1e5ea2fd4ebce0f7f424ba11e",
  maskArgv: "9f76cce7bc90740f8467ea7bc05db41b60b37c911734b6f398f67af6d688924a",
  unwrap: "06dddeb8c7436be3876a23b0ad21ac3aa29db1b3b46f32ea24b8c36af7bb821c",
  commands: "55d7dff66a5bc9960f3b46ee9c720b137aaaf117d72992b0c3f0f8480eca51ab",
  segments: "236b0ae18c7b8dbca922b27ffeba33334077180ca767277abd1303c599dc56cd",
  commandStarts: "b95bcee41e9a883c5755ad7e352a3c4beffd57a0f93c46a6db16f51662e1cbe2",
  join: "e5ade4daf9c320a4c323f4240e191e6c5af12235f6537f58a07c4edab02aace2",
  evaluate: "cd4ce43e9498c96369eaa366f1813bd06fc9247812173ebd8ed80d7f472b34cb",
  summary: "afbb34673b390c0ade6098863215fd7a6fad04c9057888dbf7ed8cb96f0401bf"
}

const answered = new Map<string, ReadonlyArray<string>>()
/**
 * A reader's answers to the corpus, as JSON, worked out once. Asynchronous and yielding every few
 * lines, as the other property files: a case never holds vitest's worker long.
 */
const answersOf = async (name: string): Promise<ReadonlyArray<string>> => {
  const known = answered.get(name)
  if (known !== undefined) return known
  const read = Readers[name]!
  const answers: Array<string> = []
  for (const text of Lines) {
    answers.push(JSON.stringify(read(text)) ?? "undefined")
    if (answers.length % 100 === 0) await macrotask()
  }
  answered.set(name, answers)
  return answers
}

describe("masking and command reading answer as recorded (a fixed corpus of command-like lines)", () => {
  for (const name of Object.keys(Readers)) {
    it(name, async () => {
      const digest = createHash("sha256")
        .update((await answersOf(name)).join("\n"))
        .digest("hex")
      assert.strictEqual(digest, Recorded[name], `${name}: its answers changed (WARDEN_CORPUS_DUMP=FILE writes them)`)
    })
  }

  it("the corpus reaches what it is meant to: secrets, simple commands, decisions and lines read in part", async () => {
    const masked = (await answersOf("maskText")).filter((answer, i) => answer !== JSON.stringify(Lines[i])).length
    const incomplete = (await answersOf("commands")).filter((answer) => answer.includes(`"complete":false`)).length
    const simple = (await answersOf("unwrap")).filter((answer) => answer.includes(`"simple":true`)).length
    const decided = (await answersOf("evaluate")).filter(
      (answer) => answer !== `[{"_tag":"NoMatch"},{"_tag":"NoMatch"}]`
    ).length
    assert.isAbove(masked, 1_000)
    assert.isAbove(simple, 300)
    assert.isAbove(incomplete, 20)
    assert.isAbove(decided, 50)
  })

  // Not a test of its own (it would show as skipped on every ordinary run): with
  // WARDEN_CORPUS_DUMP set, the answers are written once the tests above ran.
  afterAll(async () => {
    const file = process.env["WARDEN_CORPUS_DUMP"]
    if (file === undefined) return
    const rows: Array<string> = []
    for (const name of Object.keys(Readers)) {
      for (const [i, answer] of (await answersOf(name)).entries())
        rows.push(`${name}\t${i}\t${JSON.stringify(Lines[i])}\t${answer}`)
    }
    writeFileSync(file, `${rows.join("\n")}\n`)
  })
})
