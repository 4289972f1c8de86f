import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as ShellCommand from "../src/ShellCommand.js"
import { request } from "./Captured.js"

const { unwrap, segments, quote, join } = ShellCommand

/** Plain words: nothing a shell would treat specially. */
const plainWord = FastCheck.stringMatching(/^[A-Za-z0-9_@%+:,./-]{1,12}$/)
/** Any text without NUL (what a word may contain once quoted). */
const anyWord = FastCheck.string({ unit: "binary", maxLength: 24 }).filter((s) => !s.includes("\u0000"))

describe("ShellCommand.unwrap", () => {
  it("peels the login-shell wrapper codex puts around every command (real frame)", () => {
    const r = request("a-cmd-accept")
    assert.strictEqual(r.method, "item/commandExecution/requestApproval")
    const command = r.method === "item/commandExecution/requestApproval" ? r.params.command! : ""
    assert.isTrue(command.startsWith("/bin/bash -lc '"))
    const u = unwrap(command)
    assert.isTrue(u.inner.startsWith("echo approved-output-accept; for i in 1 2 3"))
    assert.deepStrictEqual(u.argv, ["echo", "approved-output-accept"])
    assert.isFalse(u.simple)
  })

  it("unwraps bash/sh/zsh with -c, -lc, -cl, --login", () => {
    for (const wrapper of [
      "/bin/bash -lc",
      "bash -c",
      "sh -c",
      "/usr/bin/zsh -lc",
      "zsh -cl",
      "bash --login -c",
      "/bin/sh -l -c"
    ]) {
      const u = unwrap(`${wrapper} 'git status --short'`)
      assert.deepStrictEqual(
        u,
        { argv: ["git", "status", "--short"], simple: true, inner: "git status --short" },
        wrapper
      )
    }
    assert.deepStrictEqual(unwrap(`bash -c "git log --format='%h'"`).argv, ["git", "log", "--format=%h"])
  })

  it("does not unwrap shells at unexpected paths, with extra arguments, or without -c", () => {
    assert.strictEqual(unwrap("/tmp/evil/bash -c 'git status'").inner, "/tmp/evil/bash -c 'git status'")
    assert.strictEqual(unwrap("bash -c 'echo $0' git").inner, "bash -c 'echo $0' git")
    assert.strictEqual(unwrap("bash script.sh").inner, "bash script.sh")
    assert.strictEqual(unwrap("bash -lc").inner, "bash -lc")
  })

  it("splits words honouring single quotes, double quotes and backslashes", () => {
    assert.deepStrictEqual(unwrap(`echo 'a b' "c d" e\\ f 'it'\\''s' "say \\"hi\\""`).argv, [
      "echo",
      "a b",
      "c d",
      "e f",
      "it's",
      'say "hi"'
    ])
    assert.deepStrictEqual(unwrap(`printf "%s\\n" x`).argv, ["printf", "%s\\n", "x"])
    assert.deepStrictEqual(unwrap(`echo ''`).argv, ["echo", ""])
    assert.deepStrictEqual(unwrap("echo a\\\nb").argv, ["echo", "ab"])
    assert.isTrue(unwrap(`echo 'a;b|c&d>e$(f)'`).simple, "operators inside single quotes are text")
  })

  it("a command with control operators, redirections or expansions is not simple", () => {
    const compound = [
      "git status; rm -rf /",
      "a && b",
      "a || b",
      "a | b",
      "a & b",
      "a > out",
      "a < in",
      "a >> out",
      "a 2>&1",
      "echo $(whoami)",
      "echo `whoami`",
      "echo $HOME",
      "echo ${HOME}",
      'echo "$HOME"',
      "echo $'x'",
      "a\nb",
      "ls *.ts",
      "ls ?",
      "ls [ab]",
      "echo {a,b}",
      "cd ~",
      "(a)",
      "{ a; }",
      "a # comment",
      "cat <(ls)",
      "a |& b",
      "a &> out"
    ]
    for (const c of compound) assert.isFalse(unwrap(c).simple, c)
  })

  it("argv is the first segment's words, or undefined when the script cannot be read", () => {
    assert.deepStrictEqual(unwrap("git status && rm -rf /").argv, ["git", "status"])
    assert.deepStrictEqual(unwrap("git status 2>/dev/null").argv, ["git", "status"])
    assert.strictEqual(unwrap("echo 'unterminated").argv, undefined)
    assert.strictEqual(unwrap('echo "unterminated').argv, undefined)
    assert.strictEqual(unwrap("echo $(unterminated").argv, undefined)
    assert.strictEqual(unwrap("").argv, undefined)
    assert.strictEqual(unwrap("   ").argv, undefined)
    assert.isFalse(unwrap("").simple)
  })

  it("property: plain words joined by spaces read back as the same simple argv", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(plainWord, { minLength: 1, maxLength: 8 }), (words) => {
        const u = unwrap(words.join(" "))
        return u.simple && JSON.stringify(u.argv) === JSON.stringify(words)
      }),
      { numRuns: 300 }
    )
  })

  it("property: any words, quoted, read back unchanged, wrapped or not", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(anyWord, { minLength: 1, maxLength: 6 }), (words) => {
        const line = join(words)
        const direct = unwrap(line)
        const wrapped = unwrap(`/bin/bash -lc ${quote(line)}`)
        return (
          direct.simple &&
          JSON.stringify(direct.argv) === JSON.stringify(words) &&
          wrapped.inner === line &&
          JSON.stringify(wrapped.argv) === JSON.stringify(words) &&
          wrapped.simple
        )
      }),
      { numRuns: 300 }
    )
  })

  it("property: appending a control operator and a command makes any simple command not simple", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(anyWord, { minLength: 1, maxLength: 5 }),
        FastCheck.constantFrom(";", "&&", "||", "|", "&", "\n", ">", "<"),
        (words, op) => !unwrap(`${join(words)} ${op} rm -rf /`).simple
      ),
      { numRuns: 300 }
    )
  })

  it("property: never throws, and simple implies a defined argv", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "binary", maxLength: 200 }), (s) => {
        const u = unwrap(s)
        segments(s)
        return !u.simple || u.argv !== undefined
      }),
      { numRuns: 500 }
    )
  })
})

describe("ShellCommand.segments", () => {
  it("lists every command of a compound line, through wrappers, substitutions and here-documents", () => {
    const has = (line: string, words: ReadonlyArray<string>) =>
      segments(line).some((s) => JSON.stringify(s.slice(0, words.length)) === JSON.stringify(words))
    assert.isTrue(has("/bin/bash -lc 'git status; rm -rf /tmp/x'", ["rm", "-rf"]))
    assert.isTrue(has("echo $(rm -rf x)", ["rm", "-rf"]))
    assert.isTrue(has("echo `rm -rf x`", ["rm", "-rf"]))
    assert.isTrue(has('echo "$(rm -rf x)"', ["rm", "-rf"]))
    assert.isTrue(has("true && (cd /; rm -rf x)", ["rm", "-rf"]))
    assert.isTrue(has("FOO=1 rm -rf x", ["rm", "-rf"]))
    assert.isTrue(has("if true; then rm -rf x; fi", ["rm", "-rf"]))
    assert.isTrue(has("sh -c 'rm -rf x' extra", ["rm", "-rf"]))
    assert.isTrue(has("eval 'rm -rf x'", ["rm", "-rf"]))
    assert.isTrue(has("bash <<EOF\nrm -rf x\nEOF", ["rm", "-rf"]))
    // an apostrophe in a here-document body must not hide what follows it
    assert.isTrue(has("cat <<EOF\nit's\nEOF\nrm -rf x", ["rm", "-rf"]))
    assert.isTrue(has("echo 'unterminated; rm -rf x", ["echo"]))
  })

  it("the wrapper around the whole line is not itself a segment", () => {
    assert.deepStrictEqual(segments("/bin/bash -lc 'git status'"), [["git", "status"]])
  })

  it("commandStarts looks past runners such as sudo, env and timeout", () => {
    const starts = (line: string) =>
      segments(line)
        .flatMap((s) => ShellCommand.commandStarts(s))
        .map((s) => s.join(" "))
    assert.include(starts("sudo -u root rm -rf /"), "rm -rf /")
    assert.include(starts("env A=1 rm x"), "rm x")
    assert.include(starts("timeout 5 rm x"), "rm x")
    assert.deepStrictEqual(starts("git rm x"), ["git rm x"])
  })
})

describe("ShellCommand.commands: nested shells and runners with any options", () => {
  const runsRm = (line: string) => {
    const read = ShellCommand.commands(line)
    return !read.complete || read.starts.some((s) => s.words[s.at] === "rm")
  }

  /** Shell options as a shell reads them: alone, with their argument, or bundled. */
  const shellOption = FastCheck.constantFrom(
    ["-e"],
    ["-x"],
    ["-eu"],
    ["+x"],
    ["-o", "errexit"],
    ["+o", "posix"],
    ["-O", "extglob"],
    ["+O", "nullglob"],
    ["-euo", "pipefail"],
    ["--norc"],
    ["--noprofile"],
    ["--login"],
    ["--rcfile", "/tmp/rc"],
    ["--init-file", "/tmp/init"],
    ["-l"],
    ["-i"],
    ["-T"]
  )

  it("property: bash/sh/dash/zsh/ksh with any options around -c: the script is read", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.constantFrom("bash", "/bin/sh", "dash", "zsh", "ksh", "/usr/local/bin/bash"),
        FastCheck.array(shellOption, { maxLength: 4 }),
        FastCheck.array(shellOption, { maxLength: 3 }),
        FastCheck.boolean(),
        FastCheck.constantFrom("", "sudo -u root ", "env -u HOME ", "timeout -s KILL 5 ", "xargs -I R ", "nice -n 5 "),
        (shell, before, after, dashDash, runner) => {
          const words = [shell, ...before.flat(), "-c", ...after.flat(), ...(dashDash ? ["--"] : []), "rm -rf ~"]
          const line = `${runner}${join(words)}`
          return runsRm(line) && runsRm(`/bin/bash -lc ${quote(line)}`)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("reads env's split string as more of env's arguments", () => {
    const has = (line: string, words: ReadonlyArray<string>) =>
      segments(line).some((s) => JSON.stringify(s) === JSON.stringify(words))
    assert.isTrue(has("env -S 'rm -rf ~'", ["env", "rm", "-rf", "~"]))
    assert.isTrue(has("env -iS'-u HOME rm -rf ~'", ["env", "-u", "HOME", "rm", "-rf", "~"]))
    assert.isTrue(has("env -u HOME --split-string='rm\\_x'", ["env", "rm", "x"]))
    assert.isTrue(runsRm("env -S '-i rm -rf ~'"))
    // over-reading is deliberate: after a runner every later word is read as a start, option arguments too
    assert.isTrue(runsRm("env -u rm ls"))
  })

  it("commandStarts: after find's -exec, after every runner word; not after find's other options", () => {
    const starts = (line: string) =>
      segments(line)
        .flatMap((s) => ShellCommand.commandStarts(s))
        .map((s) => s.join(" "))
    assert.deepStrictEqual(starts("find . -name rm -exec rm {} +"), ["find . -name rm -exec rm {} +", "rm {} +"])
    assert.include(starts("time -p rm x"), "rm x")
    assert.include(starts("coproc NAME { rm x; }"), "rm x")
  })
})
