import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as SecretPatterns from "../src/internal/SecretPatterns.js"
import * as SecretMask from "../src/SecretMask.js"

const { Mask, isSecretKey, looksSecret, maskText, maskValue, maskRecord } = SecretMask

const fakeSecrets = {
  openai: "sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2m3N4",
  github: "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
  slack: "xoxb-1234567890-abcdefghij",
  aws: "AKIAIOSFODNN7EXAMPLE",
  jwt: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  entropy: "Zx9Qm2Lp7Rt4Vw8Ks3Nd6Hf1Jb5",
  hex: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
  labelled: "prod-db-Zx9Qm2Lp7Rt4Vw8Ks3Nd6Hf1Jb5",
  base64url: "Zx9Qm2Lp7R-t4Vw8Ks3Nd6Hf1Jb5_q0"
}

describe("SecretMask.isSecretKey", () => {
  it("recognises secret-looking keys in any case and separator style", () => {
    const secret = [
      "password",
      "Password",
      "db_password",
      "passphrase",
      "passwd",
      "secret",
      "client_secret",
      "token",
      "accessToken",
      "x-auth-token",
      "api key",
      "apiKey",
      "api_key",
      "APIKEY",
      "X-Api-Key",
      "access_key",
      "AWS_ACCESS_KEY_ID",
      "privateKey",
      "credential",
      "credentials",
      "cookie",
      "Set-Cookie",
      "session",
      "sessionId",
      "auth",
      "authorization",
      "bearer",
      "otp",
      "one_time_code",
      "oneTimeCode",
      "2fa_code",
      "mfaCode",
      "pin",
      "PIN",
      "ssn",
      "verification_code",
      "card_number"
    ]
    for (const key of secret) assert.isTrue(isSecretKey(key), key)
  })

  it("leaves ordinary keys alone", () => {
    const plain = [
      "why",
      "path",
      "author",
      "authority",
      "spinner",
      "mapping",
      "shipping",
      "ping",
      "keyboard",
      "key",
      "max_tokens",
      "total_tokens",
      "name",
      "colour",
      "command"
    ]
    for (const key of plain) assert.isFalse(isSecretKey(key), key)
  })
})

describe("SecretMask.maskText", () => {
  it("masks secrets that look like secrets whatever their key", () => {
    for (const [name, secret] of Object.entries(fakeSecrets)) {
      assert.isTrue(looksSecret(secret), name)
      const masked = maskText(`value is ${secret} here`)
      assert.notInclude(masked, secret, name)
      assert.include(masked, Mask, name)
      assert.isTrue(masked.startsWith("value is "), name)
    }
  })

  it("masks credentials inside commands, headers, URLs and assignments, keeping the rest", () => {
    assert.strictEqual(
      maskText("curl -H 'Authorization: Bearer abcdefgh12345678' https://x"),
      "curl -H 'Authorization: •••' https://x"
    )
    assert.strictEqual(maskText("Bearer abcdefgh12345678"), "Bearer •••")
    assert.strictEqual(maskText("git push https://user:hunter2@github.com/x"), "git push https://user:•••@github.com/x")
    assert.strictEqual(maskText("export DB_PASSWORD=hunter2 && run"), "export DB_PASSWORD=••• && run")
    assert.strictEqual(maskText(`{"password": "hunter2", "user": "ann"}`), `{"password": "•••", "user": "ann"}`)
    assert.strictEqual(maskText("mysql --password hunter2 -u root"), "mysql --password ••• -u root")
    assert.strictEqual(
      maskText("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----\nafter"),
      "•••\nafter"
    )
  })

  it("does not mask ordinary text, paths, ids and counts", () => {
    const plain = [
      "git status --short",
      "/var/tmp/rc-probe-perm-grant-turn",
      "01a2299e-64e8-7690-b331-db5260c075fa",
      "max_tokens=100",
      "Which token provider should I use?",
      "/home/User1/Projects/MyApp2/src/components/Button.tsx",
      "call_1_0",
      'Allow the probe MCP server to run tool "poke"?',
      "/tmp/rc-ws-a-cmd-accept-BOiw0A",
      "create_user_account_v2_endpoint",
      "OPENAI_API_KEY=$OPENAI_API_KEY"
    ]
    for (const text of plain) assert.strictEqual(maskText(text), text)
  })

  it("property: a planted token never survives, wherever it sits in text", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.string({ maxLength: 40 }),
        FastCheck.string({ maxLength: 40 }),
        FastCheck.constantFrom(...Object.values(fakeSecrets)),
        (before, after, secret) => !maskText(`${before} ${secret} ${after}`).includes(secret)
      ),
      { numRuns: 300 }
    )
  })

  it("cuts very long text and never throws", () => {
    const long = "a ".repeat(200_000)
    const masked = maskText(long)
    assert.isTrue(masked.endsWith("…"))
    assert.isBelow(masked.length, long.length)
    assert.strictEqual(SecretMask.truncate("abcdef", 4), "abc…")
    assert.strictEqual(SecretMask.truncate("abc", 4), "abc")
  })

  it("truncate counts characters, not code units: a cut text ends with …, a kept one is whole", () => {
    // A surrogate pair near the cut: "a😀bcd" is five characters (six code units).
    assert.strictEqual(SecretMask.truncate("a😀bcd", 3), "a😀…")
    assert.strictEqual(SecretMask.truncate("a😀bcd", 5), "a😀bcd")
    assert.strictEqual(SecretMask.truncate("😀x", 1), "…")
    assert.strictEqual(SecretMask.truncate("x", 0), "…")
    // Against the definition, over texts of pairs, lone surrogates and ASCII.
    const unit = FastCheck.constantFrom("a", " ", "😀", "\ud800", "\udc00", "é", "日")
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(unit, { maxLength: 12 }),
        FastCheck.integer({ min: 0, max: 14 }),
        (parts, max) => {
          const text = parts.join("")
          const chars = Array.from(text)
          const expected = chars.length <= max ? text : `${chars.slice(0, Math.max(0, max - 1)).join("")}…`
          return SecretMask.truncate(text, max) === expected
        }
      ),
      { numRuns: 500 }
    )
  })
})

describe("SecretMask.maskValue / maskRecord", () => {
  it("masks values under secret keys whole, and secret-looking values under any key, recursively", () => {
    const input = {
      why: "probe",
      password: "hunter2",
      nested: { apiKey: { deep: "x" }, list: [1, fakeSecrets.github, { token: 5 }], ok: true },
      note: `use ${fakeSecrets.openai}`
    }
    const out = maskRecord(input)
    assert.deepStrictEqual(out, {
      why: "probe",
      password: Mask,
      nested: { apiKey: Mask, list: [1, Mask, { token: Mask }], ok: true },
      note: `use ${Mask}`
    })
    assert.strictEqual(maskValue("password", { a: 1 }), Mask)
    assert.strictEqual(maskValue("why", "probe"), "probe")
    assert.strictEqual(maskValue("x", fakeSecrets.aws), Mask)
  })

  it("never mutates its input", () => {
    const input = { password: "hunter2", list: [fakeSecrets.slack] }
    const copy = structuredClone(input)
    maskRecord(input)
    maskValue("k", input)
    assert.deepStrictEqual(input, copy)
  })

  it("masks getters without calling them, cycles, class instances and hostile proxies", () => {
    let called = false
    const withGetter = { plain: "ok" }
    Object.defineProperty(withGetter, "lazy", { enumerable: true, get: () => ((called = true), "secret") })
    assert.deepStrictEqual(maskRecord(withGetter), { plain: "ok", lazy: Mask })
    assert.isFalse(called)

    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic["self"] = cyclic
    cyclic["list"] = [cyclic]
    assert.deepStrictEqual(maskRecord(cyclic), { a: 1, self: Mask, list: [Mask] })

    const shared = { v: 1 }
    assert.deepStrictEqual(
      maskRecord({ x: shared, y: shared }),
      { x: { v: 1 }, y: { v: 1 } },
      "a shared object is not a cycle"
    )

    assert.deepStrictEqual(maskRecord({ when: new Date(0), map: new Map() }), { when: Mask, map: Mask })

    const throwing = new Proxy(
      {},
      {
        ownKeys: () => {
          throw new Error("trap")
        }
      }
    )
    assert.deepStrictEqual(maskRecord(throwing), { "(value)": Mask })
    assert.deepStrictEqual(maskRecord({ inner: throwing }), { inner: Mask })
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    assert.strictEqual(maskValue("x", proxy), Mask)
    assert.deepStrictEqual(maskRecord({ f: () => 1, s: Symbol("x") }), { f: Mask, s: Mask })
  })

  it("a __proto__ key is copied as data, not as a prototype", () => {
    const input = JSON.parse(`{"__proto__": {"polluted": true}, "ok": 1}`) as unknown
    const out = maskRecord(input)
    assert.strictEqual(Object.getPrototypeOf(out), Object.prototype)
    assert.deepStrictEqual(Object.keys(out), ["__proto__", "ok"])
    assert.isUndefined(({} as Record<string, unknown>)["polluted"])
  })

  it("bounds depth, breadth and string length", () => {
    let deep: unknown = "bottom"
    for (let i = 0; i < 20; i++) deep = { d: deep }
    let cursor: unknown = maskRecord(deep)
    let depth = 0
    while (typeof cursor === "object" && cursor !== null) {
      cursor = (cursor as Record<string, unknown>)["d"]
      depth++
    }
    assert.strictEqual(cursor, Mask)
    assert.isAtMost(depth, 9)
    const wide = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, i]))
    assert.strictEqual(Object.keys(maskRecord(wide)).length, 101)
    const list = maskValue(
      "l",
      Array.from({ length: 500 }, (_, i) => i)
    ) as ReadonlyArray<unknown>
    assert.strictEqual(list.length, 101)
    assert.strictEqual(list[100], "… 400 more")
    const text = maskValue("t", "x ".repeat(5_000)) as string
    assert.strictEqual(text.length, 2_000)
  })

  it("maskRecord of non-records", () => {
    assert.deepStrictEqual(maskRecord(undefined), {})
    assert.deepStrictEqual(maskRecord(null), {})
    assert.deepStrictEqual(maskRecord([fakeSecrets.aws]), { "(value)": [Mask] })
    assert.deepStrictEqual(maskRecord("plain"), { "(value)": "plain" })
  })

  it("maskArgv masks the value after a secret flag and secret-looking words", () => {
    assert.deepStrictEqual(SecretMask.maskArgv(["mysql", "--password", "hunter2", "-u", "root"]), [
      "mysql",
      "--password",
      Mask,
      "-u",
      "root"
    ])
    assert.deepStrictEqual(SecretMask.maskArgv(["tool", "--token=abc", fakeSecrets.github]), [
      "tool",
      `--token=${Mask}`,
      Mask
    ])
  })

  it("property: never throws on arbitrary JSON-like input and never returns a planted secret", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.anything({ maxDepth: 4 }),
        FastCheck.constantFrom(...Object.values(fakeSecrets)),
        (value, secret) => {
          const out = maskRecord({ value, planted: [secret], password: value })
          return !JSON.stringify(out).includes(secret)
        }
      ),
      { numRuns: 200 }
    )
  })
})

describe("assignments inside values", () => {
  it("a secret pair inside a non-secret pair's value is masked", () => {
    assert.strictEqual(SecretMask.maskText("question: token=abc123"), "question: token=•••")
    assert.strictEqual(
      SecretMask.maskText("note: please use password=hunter2 here"),
      "note: please use password=••• here"
    )
    assert.strictEqual(SecretMask.maskText("a:b:c:d=e"), "a:b:c:d=e")
  })
})

describe("password forms of common programs' arguments", () => {
  // each as a command line (maskText) and as an argv (maskArgv): the password masked, the rest kept
  const cases: ReadonlyArray<readonly [ReadonlyArray<string>, ReadonlyArray<string>]> = [
    [
      ["mysql", "-u", "root", "-phunter2", "app"],
      ["mysql", "-u", "root", `-p${Mask}`, "app"]
    ],
    [
      ["mysqldump", "--password=hunter2", "app"],
      ["mysqldump", `--password=${Mask}`, "app"]
    ],
    [
      ["mariadb", "-h", "db", "-phunter2"],
      ["mariadb", "-h", "db", `-p${Mask}`]
    ],
    [
      ["curl", "-u", "admin:hunter2", "https://x"],
      ["curl", "-u", `admin:${Mask}`, "https://x"]
    ],
    [
      ["curl", "--user", "admin:hunter2", "https://x"],
      ["curl", "--user", `admin:${Mask}`, "https://x"]
    ],
    [
      ["curl", "-uadmin:hunter2", "https://x"],
      ["curl", `-uadmin:${Mask}`, "https://x"]
    ],
    [
      ["curl", "--user=admin:hunter2", "https://x"],
      ["curl", `--user=admin:${Mask}`, "https://x"]
    ],
    [
      ["curl", "-U", "proxy:hunter2", "https://x"],
      ["curl", "-U", `proxy:${Mask}`, "https://x"]
    ],
    [
      ["sshpass", "-p", "hunter2", "ssh", "host"],
      ["sshpass", "-p", Mask, "ssh", "host"]
    ],
    [
      ["sshpass", "-phunter2", "ssh", "host"],
      ["sshpass", `-p${Mask}`, "ssh", "host"]
    ],
    [
      ["docker", "login", "-u", "me", "-p", "hunter2", "registry.io"],
      ["docker", "login", "-u", "me", "-p", Mask, "registry.io"]
    ],
    [
      ["docker", "login", "--password", "hunter2", "registry.io"],
      ["docker", "login", "--password", Mask, "registry.io"]
    ],
    [
      ["podman", "login", "-phunter2", "quay.io"],
      ["podman", "login", `-p${Mask}`, "quay.io"]
    ],
    [
      ["redis-cli", "-a", "hunter2", "ping"],
      ["redis-cli", "-a", Mask, "ping"]
    ],
    [
      ["openssl", "enc", "-aes-256-cbc", "-k", "hunter2", "-in", "f"],
      ["openssl", "enc", "-aes-256-cbc", "-k", Mask, "-in", "f"]
    ],
    [
      ["openssl", "rsa", "-passin", "pass:hunter2", "-in", "k"],
      ["openssl", "rsa", "-passin", Mask, "-in", "k"]
    ],
    [
      ["openssl", "passwd", "-6", "hunter2"],
      ["openssl", "passwd", "-6", Mask]
    ],
    [
      ["aws", "configure", "set", "aws_secret_access_key", "wJalrXUtnFEMI"],
      ["aws", "configure", "set", "aws_secret_access_key", Mask]
    ],
    [
      ["htpasswd", "-b", "/etc/htpasswd", "admin", "hunter2"],
      ["htpasswd", "-b", "/etc/htpasswd", "admin", Mask]
    ],
    [
      ["htpasswd", "-nbB", "admin", "hunter2"],
      ["htpasswd", "-nbB", "admin", Mask]
    ],
    [
      ["git", "config", "--global", "user.password", "hunter2"],
      ["git", "config", "--global", "user.password", Mask]
    ],
    [
      ["npm", "config", "set", "//registry.npmjs.org/:_authToken", "hunter2"],
      ["npm", "config", "set", "//registry.npmjs.org/:_authToken", Mask]
    ],
    [
      ["keytool", "-list", "-storepass", "hunter2", "-keypass", "hunter3"],
      ["keytool", "-list", "-storepass", Mask, "-keypass", Mask]
    ],
    [
      ["smbclient", "//h/share", "-U", "admin%hunter2"],
      ["smbclient", "//h/share", "-U", `admin%${Mask}`]
    ],
    [
      ["ldapsearch", "-x", "-D", "cn=admin", "-w", "hunter2", "-b", "dc=x"],
      ["ldapsearch", "-x", "-D", "cn=admin", "-w", Mask, "-b", "dc=x"]
    ],
    [
      ["zip", "-P", "hunter2", "a.zip", "f"],
      ["zip", "-P", Mask, "a.zip", "f"]
    ],
    [
      ["mongosh", "-u", "app", "-p", "hunter2", "--authenticationDatabase", "admin"],
      ["mongosh", "-u", "app", "-p", Mask, "--authenticationDatabase", "admin"]
    ],
    [
      ["sqlcmd", "-S", "db", "-U", "sa", "-P", "hunter2"],
      ["sqlcmd", "-S", "db", "-U", "sa", "-P", Mask]
    ],
    [
      ["gh", "secret", "set", "NAME", "--body", "hunter2"],
      ["gh", "secret", "set", "NAME", "--body", Mask]
    ],
    [
      ["lftp", "-u", "user,hunter2", "host"],
      ["lftp", "-u", `user,${Mask}`, "host"]
    ],
    [
      ["docker", "exec", "-it", "db", "mysql", "-uroot", "-phunter2", "app"],
      ["docker", "exec", "-it", "db", "mysql", "-uroot", `-p${Mask}`, "app"]
    ],
    [
      ["tool", "--token", "hunter2", "--api-key", "hunter3", "--pw", "hunter4"],
      ["tool", "--token", Mask, "--api-key", Mask, "--pw", Mask]
    ]
  ]

  it("as an argv and as a command line (bare, and inside codex's bash -lc wrapper)", () => {
    for (const [argv, masked] of cases) {
      assert.deepStrictEqual(SecretMask.maskArgv(argv), masked, argv.join(" "))
      assert.strictEqual(maskText(argv.join(" ")), masked.join(" "), argv.join(" "))
      assert.strictEqual(
        maskText(`/bin/bash -lc '${argv.join(" ")}'`),
        `/bin/bash -lc '${masked.join(" ")}'`,
        argv.join(" ")
      )
    }
  })

  it("each program's own form: what is not a password stays", () => {
    const plain = [
      "mysql -p app", // -p alone prompts: `app` is the database
      "mysql -P 3306 -h db app",
      "docker run -p 8080:80 nginx",
      "curl -u admin https://x",
      "openssl x509 -keyform PEM -in c.pem",
      "aws configure set region us-east-1",
      "htpasswd -c /etc/htpasswd admin",
      "git config user.name Ann",
      "git clone https://git@github.com/x",
      "ssh -p 22 host",
      "redis-cli ping",
      "zip -r a.zip dir",
      "echo set password for the user",
      "npm config set registry https://r"
    ]
    for (const text of plain) assert.strictEqual(maskText(text), text)
    assert.deepStrictEqual(SecretMask.maskArgv(["mysql", "-p", "app"]), ["mysql", "-p", "app"])
  })

  it("quoted passwords, nested quotes and JSON inside JSON", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      [`mysql -p'hunter 2' app`, `mysql -p'${Mask}' app`],
      [`/bin/bash -lc 'mysql -p'\\''hunter 2'\\'' app'`, `/bin/bash -lc 'mysql -p'\\''${Mask}'\\'' app'`],
      [`curl -u "admin:hunter 2" https://x`, `curl -u "admin:${Mask}" https://x`],
      [`PASSWORD="'hunter2'" run`, `PASSWORD="'${Mask}'" run`],
      [`--password "'hunter2'" next`, `--password "'${Mask}'" next`],
      [`PASSWORD='hunter 2' run`, `PASSWORD='${Mask}' run`],
      [`{"password": "hunter 2 x", "user": "ann"}`, `{"password": "${Mask}", "user": "ann"}`],
      [
        `{\\"password\\": \\"hunter2\\", \\"user\\": \\"ann\\"}`,
        `{\\"password\\": \\"${Mask}\\", \\"user\\": \\"ann\\"}`
      ],
      [`Authorization: Bearer "abcdefgh12345678"`, `Authorization: ${Mask}"${Mask}"`],
      [`{"Authorization": "Bearer abcdefgh12345678"}`, `{"Authorization": "${Mask}"}`],
      ["psql postgresql://app:p@ss@db/x", `psql postgresql://app:${Mask}@db/x`],
      ["git clone https://abcdefghij1234567890@dev.azure.com/org/x", `git clone https://${Mask}@dev.azure.com/org/x`],
      ["SSHPASS=hunter2 sshpass -e ssh h", `SSHPASS=${Mask} sshpass -e ssh h`]
    ]
    for (const [text, masked] of cases) assert.strictEqual(maskText(text), masked, text)
  })

  it("maskJson masks values under secret keys, which mapping strings alone cannot", () => {
    const record = { why: "probe", password: "hunter2", nested: [{ api_key: 42, note: "token=abc123" }] }
    assert.deepStrictEqual(SecretMask.maskJson(record), {
      why: "probe",
      password: Mask,
      nested: [{ api_key: Mask, note: `token=${Mask}` }]
    })
  })
})

describe("the fixed patterns' one search first", () => {
  // A text is scanned by the fixed patterns only if `AnyNeeded` finds in it a substring one of them
  // needs: a needle it missed (escaped wrong, left out) would let that pattern's secrets through.
  it("finds every substring any fixed pattern needs, wherever it stands, and nothing in plain words", () => {
    for (const scan of SecretPatterns.FixedScans) {
      assert.isAbove(scan.needs.length, 0, `${scan.pattern} needs something (else the search must match every text)`)
      for (const need of scan.needs) {
        assert.isTrue(SecretPatterns.AnyNeeded.test(need), need)
        assert.isTrue(SecretPatterns.AnyNeeded.test(`words before ${need} and after`), need)
      }
    }
    assert.isFalse(SecretPatterns.AnyNeeded.test("c12 thr_1 turn_1 make check /repo/src accepted"))
  })
})
