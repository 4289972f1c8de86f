/**
 * Passwords in the arguments of common programs, in forms no key names, as each program reads
 * them: `mysql -pX` (but not `mysql -p db`), `curl -u user:X`, `sshpass -p X`, `docker login -p
 * X`, `redis-cli -a X`, `openssl enc -k X`, `aws configure set aws_secret_access_key X`,
 * `htpasswd -b file user X`, ... (`ProgramForms`). Read in a text of command lines
 * (`programPasswords`) or over an argv's exact words (`argvPasswords`), one pass, each word once.
 */
import { isSecretKey } from "./SecretKeys.js"
import type { Span } from "./SecretPatterns.js"
import type { CommandWordReader, ValueExtent } from "./ShellLexer.js"
import { programName, readArgvWords, readTextWords, valueExtent } from "./ShellLexer.js"

/**
 * Where a program's arguments carry a password in a form no key names (`mysql -phunter2`,
 * `curl -u user:pass`, `sshpass -p pass`, `htpasswd -b file user pass`), as each program reads them.
 */
interface ArgForms {
  /** Applies only once this word followed the program (a subcommand: `docker login`, `openssl passwd`). */
  readonly after?: string
  /** Options whose value is a password: the next word, or attached (`-pX`, `-p=X`, `--password=X`). */
  readonly value?: ReadonlyArray<string>
  /** Options whose value is a password only as the next word (`openssl enc -k PASS`: `-keyform` is another option). */
  readonly next?: ReadonlyArray<string>
  /** Options whose value is a password only when attached (`mysql -pSECRET`: `-p SECRET` prompts, SECRET is the database). */
  readonly attached?: ReadonlyArray<string>
  /** Options whose value is `user<separator>password` (`curl -u user:pass`, `smbclient -U user%pass`): the part after it. */
  readonly userPass?: ReadonlyArray<string>
  readonly separator?: string
  /** Words after which `KEY VALUE` sets a setting (`aws configure set KEY VALUE`, `git config KEY VALUE`): VALUE, when KEY is secret. */
  readonly keyValue?: ReadonlyArray<string>
  /** The last word of the command is a password once a short option bundle has this letter (`htpasswd -b`), or, with "", once `after` was seen. */
  readonly lastWhen?: string
}

const forms = (programs: ReadonlyArray<string>, ...list: ReadonlyArray<ArgForms>) =>
  programs.map((p) => [p, list] as const)
const SetWords = ["set", "config"]

/** The password forms of each program (by the basename of its first word). */
const ProgramForms = new Map<string, ReadonlyArray<ArgForms>>(
  [
    ...forms(
      [
        "mysql",
        "mysqldump",
        "mysqladmin",
        "mysqlimport",
        "mysqlshow",
        "mysqlcheck",
        "mysqlpump",
        "mysqlslap",
        "mysqlbinlog",
        "mysqlsh",
        "mariadb",
        "mariadb-dump",
        "mariadb-admin",
        "mariadb-import",
        "mariadb-show",
        "mariadb-check",
        "mariadb-slap",
        "mariadb-binlog",
        "7z",
        "7za",
        "7zr",
        "rar",
        "unrar"
      ],
      { attached: ["-p"] }
    ),
    ...forms(["sshpass"], { value: ["-p"] }),
    ...forms(["docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane", "regctl", "finch"], {
      after: "login",
      value: ["-p", "--password"]
    }),
    ...forms(["redis-cli", "valkey-cli", "keydb-cli"], { next: ["-a"] }),
    ...forms(["openssl"], { next: ["-k", "-K"] }, { after: "passwd", lastWhen: "" }),
    ...forms(
      [
        "mongo",
        "mongosh",
        "mongodump",
        "mongorestore",
        "mongoexport",
        "mongoimport",
        "mongostat",
        "mongotop",
        "mongofiles"
      ],
      { next: ["-p"] }
    ),
    ...forms(["sqlcmd", "bcp", "osql", "isql"], { value: ["-P"] }),
    ...forms(
      [
        "ldapsearch",
        "ldapadd",
        "ldapmodify",
        "ldapdelete",
        "ldapwhoami",
        "ldapcompare",
        "ldapmodrdn",
        "ldapexop",
        "ldapurl"
      ],
      { value: ["-w"] }
    ),
    ...forms(["ldappasswd"], { value: ["-w", "-s", "-a"] }),
    ...forms(["zip", "unzip", "zipcloak", "funzip"], { value: ["-P"] }),
    ...forms(["curl"], { userPass: ["-u", "--user", "-U", "--proxy-user"], separator: ":" }),
    ...forms(["smbclient", "rpcclient", "smbget", "smbcacls", "smbmap", "smbtree", "net", "mount.cifs"], {
      userPass: ["-U", "--user"],
      separator: "%"
    }),
    ...forms(["lftp"], { userPass: ["-u", "--user"], separator: "," }),
    ...forms(["htpasswd"], { lastWhen: "b" }),
    ...forms(["xfreerdp", "wlfreerdp", "sdl-freerdp"], { attached: ["/p:"] }),
    ...forms(["gh"], { after: "secret", value: ["-b", "--body"] }),
    ...forms(
      [
        "aws",
        "npm",
        "pnpm",
        "yarn",
        "git",
        "doppler",
        "dotnet",
        "heroku",
        "flyctl",
        "fly",
        "vercel",
        "netlify",
        "firebase",
        "gcloud",
        "az",
        "gh",
        "conda",
        "pip",
        "poetry",
        "composer",
        "bundle",
        "gem",
        "cargo",
        "kubectl",
        "vault",
        "op",
        "railway",
        "supabase",
        "wrangler"
      ],
      { keyValue: SetWords }
    )
  ].reduce(
    (all, [program, list]) => all.set(program, [...(all.get(program) ?? []), ...list]),
    new Map<string, ReadonlyArray<ArgForms>>()
  )
)

/** Every program of `ProgramForms` (a text without any of them has none of their forms). */
const ProgramNames = new RegExp(
  [...ProgramForms.keys()]
    .sort((a, b) => b.length - a.length)
    .map((n) => n.replace(/[.+]/g, "\\$&"))
    .join("|")
)

/** A word that is an option, not a value (`-u`, `--host`): a value option followed by one gets nothing. */
const isOptionWord = (word: string): boolean => word.startsWith("--") || /^-[A-Za-z]$/.test(word)

/**
 * Reads the words of command lines (`ShellLexer.readTextWords` in a text, `readArgvWords` in an
 * argv) and reports the password spans of `ProgramForms`: each word once, state only for the
 * current command (its program's forms, a pending value, the last word).
 */
class ArgReader implements CommandWordReader {
  /** The forms of the programs named in the current command, and whether each applies yet (its `after` word seen). */
  private forms: ReadonlyArray<ArgForms> | undefined = undefined
  private seen: Array<boolean> = []
  /** The next word is a value: `""` all of it, else the part after this separator. */
  private pending: string | undefined = undefined
  /** `KEY VALUE` after a set word: 1 while the key is awaited, 2 when the value is secret. */
  private key = 0
  private last = false
  private lastFrom = -1
  private lastTo = -1
  /** Where the value being read lies (one object per reader, written by `valueExtent`). */
  private readonly extent: ValueExtent = { from: 0, to: 0, resume: 0 }

  constructor(private readonly found: (from: number, to: number) => void) {}

  /** Keeps the readers' hidden class, and with it their optimized code, across full collections (see `ShellLexer`'s `Lexer.kept`). */
  static readonly kept: ArgReader = new ArgReader(() => {})

  /** End of a command: the last word, if the command's batch option or subcommand made it a password. */
  endCommand(): void {
    if (this.last && this.lastFrom >= 0) this.found(this.lastFrom, this.lastTo)
    this.forms = undefined
    this.pending = undefined
    this.key = 0
    this.last = false
    this.lastFrom = -1
  }

  /**
   * A value starting at `p` of `src` (where `ShellLexer.valueExtent` says it lies): reports it (or
   * its part after `separator`) at `base`, or keeps it as the command's last word (`report`
   * false), and returns where reading resumes.
   */
  private value(
    src: string,
    p: number,
    end: number,
    base: number,
    exact: boolean,
    separator: string,
    report = true
  ): number {
    const { resume, to } = valueExtent(src, p, end, exact, this.extent)
    let from = this.extent.from
    if (separator !== "") {
      let at = from
      while (at < to && src[at] !== separator) at++ // within the value only: a search past it could read the text again per value
      if (at >= to) return resume
      from = at + 1
    }
    if (to > from) {
      if (report) this.found(base + from, base + to)
      else {
        this.lastFrom = base + from
        this.lastTo = base + to
      }
    }
    return resume
  }

  /** `word` as one of the value options `names`: the next word is pending, or its attached value (`-pX`, `-p=X`, `--password=X`) is read. */
  private option(
    names: ReadonlyArray<string>,
    separator: string,
    word: string,
    src: string,
    s: number,
    end: number,
    base: number,
    exact: boolean
  ): number {
    for (const name of names) {
      if (word === name) this.pending = separator
      else if (
        word.startsWith(name) &&
        (name.startsWith("--") ? word[name.length] === "=" : word.length > name.length)
      ) {
        return this.value(src, s + name.length + (word[name.length] === "=" ? 1 : 0), end, base, exact, separator)
      }
    }
    return end
  }

  /** One word (see `CommandWordReader.word`): a program adds its forms; a word after one may be a password. */
  word(src: string, s: number, e: number, start: number, end: number, base: number, exact: boolean): number {
    const word = src.slice(s, e)
    const program = ProgramForms.get(programName(word))
    if (program !== undefined && this.pending === undefined && this.key !== 2) {
      // a program inside a command (`docker exec db mysql -pX`) adds its forms; a file named like
      // one (`htpasswd -b /etc/htpasswd ...`) then changes nothing
      if (this.forms === undefined) {
        this.forms = program
        this.seen = program.map((f) => f.after === undefined)
      } else if (!this.forms.includes(program[0]!)) {
        this.forms = [...this.forms, ...program]
        this.seen = [...this.seen, ...program.map((f) => f.after === undefined)]
      }
      return end
    }
    const forms = this.forms
    if (forms === undefined) return end
    if (this.pending !== undefined) {
      const separator = this.pending
      this.pending = undefined
      if (!isOptionWord(word)) return this.value(src, start, end, base, exact, separator)
    }
    if (this.key === 2) {
      this.key = 0
      if (!isOptionWord(word)) return this.value(src, start, end, base, exact, "")
    }
    const option = word.startsWith("-") || word.startsWith("/")
    if (this.key === 1 && !word.startsWith("-")) this.key = isSecretKey(word) && !word.includes("=") ? 2 : 0
    let resume = end
    let subcommand = false
    for (let f = 0; f < forms.length; f++) {
      const form = forms[f]!
      if (!this.seen[f]) {
        if (word === form.after) {
          this.seen[f] = true
          subcommand = true
          if (form.lastWhen === "") this.last = true
        }
        continue
      }
      if (form.keyValue?.includes(word)) this.key = 1
      if (!option) continue
      if (form.next?.includes(word)) this.pending = ""
      if (form.value !== undefined)
        resume = Math.max(resume, this.option(form.value, "", word, src, s, end, base, exact))
      if (form.userPass !== undefined)
        resume = Math.max(resume, this.option(form.userPass, form.separator ?? ":", word, src, s, end, base, exact))
      if (form.attached !== undefined) {
        for (const name of form.attached) {
          if (word.length > name.length && word.startsWith(name) && !word.startsWith("--")) {
            resume = Math.max(resume, this.value(src, s + name.length, end, base, exact, ""))
          }
        }
      }
      if (
        form.lastWhen !== undefined &&
        form.lastWhen !== "" &&
        word[0] === "-" &&
        word[1] !== "-" &&
        word.includes(form.lastWhen)
      )
        this.last = true
    }
    if (!option && !subcommand && forms.some((f) => f.lastWhen !== undefined)) {
      resume = Math.max(resume, this.value(src, start, end, base, exact, "", false))
    }
    return resume
  }
}

/** The password spans of `ProgramForms` in a text of command lines. */
export const programPasswords = (text: string, spans: Array<Span>): void => {
  if (!ProgramNames.test(text)) return
  readTextWords(text, new ArgReader((start, end) => spans.push({ start, end })))
}

/** The password spans of `ProgramForms` over an argv's exact words, at their offsets in the words joined by spaces. */
export const argvPasswords = (argv: ReadonlyArray<string>, spans: Array<Span>): void => {
  readArgvWords(argv, new ArgReader((start, end) => spans.push({ start, end })))
}
