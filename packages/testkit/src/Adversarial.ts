/**
 * Hostile server-request frames, what a model (which writes the commands and the tool arguments) or
 * a misbehaving server can put in one frame to make the read loop slow. Everything Warden does
 * synchronously per server request (decode, rule evaluation, the safety filter, the masked summary)
 * runs on the connection's read loop, so each of these must cost time linear in its size, and the
 * decisions must stay right: every command shape hides `rm -rf ~` somewhere a deny rule must see.
 *
 * Frames are built as JSON text (not with `JSON.stringify` of objects: the deep shapes would
 * overflow its stack), one line each, without the trailing newline. Deterministic.
 *
 * Sizes: `frameBytes` bounds each frame (default 16 MiB less a little, just under the transport's
 * default frame limit); command shapes are `commandChars` long (default just under
 * `Policy.MaxCommandLength`, 65,536: the longest command line rules still read in full).
 */

/** Where a shape attacks. */
export type Target = "shell" | "mask" | "structure" | "fileChange" | "filter"

/** One adversarial input, a server-request frame (and the `item/started` before it, if any), named and described. */
export interface Shape {
  /** A short unique name (`sudo-words`, `mcp-deep-object`, ...). */
  readonly name: string
  readonly target: Target
  /** What the frame does, for a person reading a failure. */
  readonly description: string
  /** The server-request frame, one JSON line (no newline). */
  readonly frame: string
  /**
   * The `item/started` notification that precedes the request (a fileChange item whose changes the
   * approval is about), one JSON line; the supervisor reads its changes with `Card.fileChangesOf`.
   */
  readonly itemStarted?: string
  /** The command the frame asks to run, when it is a command approval (for checks). */
  readonly command?: string
}

/** A shape whose frame is built when asked (a 16 MiB frame costs memory and a little time to build). */
export interface LazyShape {
  readonly name: string
  readonly target: Target
  readonly description: string
  readonly build: () => Shape
}

/** The sizes of the shapes. */
export interface Options {
  /** Upper bound of a frame's length in characters (ASCII: bytes); default 16 MiB - 4 KiB. */
  readonly frameBytes?: number
  /** Length of the command shapes' command lines; default 65,000. */
  readonly commandChars?: number
}

/** The thread every frame names (register a thread route with this id so the requests reach a card). */
export const ThreadId = "019a0000-adve-7000-8000-000000000001"
/** The turn every frame names. */
export const TurnId = "019a0000-adve-7000-8000-000000000002"
/** The item (or call) id every frame names; a fileChange shape's `itemStarted` uses it too. */
export const ItemId = "call_adversarial"
/** What every command shape tries to hide from a deny rule. */
export const Payload = "rm -rf ~"

const DefaultFrameBytes = 16 * 1024 * 1024 - 4096
const DefaultCommandChars = 65_000

/** `unit` repeated to about `chars` characters (whole units). */
export const fill = (unit: string, chars: number): string => unit.repeat(Math.max(1, Math.floor(chars / unit.length)))

/** Items joined by commas, as many as fit in `chars` characters. */
export const upTo = (chars: number, item: (i: number) => string): string => {
  const parts: Array<string> = []
  let size = 0
  for (let i = 0; ; i++) {
    const next = item(i)
    if (size + next.length + 1 > chars) break
    parts.push(next)
    size += next.length + 1
  }
  return parts.join(",")
}

/** POSIX single quoting (as ShellCommand.quote, kept here so the testkit has no approvals dependency). */
const quote = (word: string): string =>
  word.length > 0 && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`

/** A frame from its method and params, where `raw` maps placeholder strings to JSON text spliced in. */
const frameOf = (
  id: number,
  method: string,
  params: Record<string, unknown>,
  raw: Record<string, string> = {}
): string => {
  let text = JSON.stringify({ id, method, params })
  for (const [placeholder, json] of Object.entries(raw)) text = text.replace(JSON.stringify(placeholder), () => json)
  return text
}

/** JSON text of `depth` nested objects `{"a":{"a":...}}` around `inner`. */
export const deepObject = (depth: number, inner = '"token=hunter2hunter2"'): string =>
  '{"a":'.repeat(depth) + inner + "}".repeat(depth)

/** JSON text of `depth` nested arrays around `inner`. */
export const deepArray = (depth: number, inner = '"token=hunter2hunter2"'): string =>
  "[".repeat(depth) + inner + "]".repeat(depth)

/** The innermost script of `levels` nested `bash -c '...'` wrappers (each level quotes the previous). */
export const nestedBash = (levels: number, inner: string): string => {
  let script = inner
  for (let i = 0; i < levels; i++) script = `bash -c ${quote(script)}`
  return script
}

/** Deep shapes nest this many levels at most (deeper only measures `JSON.parse`, about a second per million levels). */
export const MaxNesting = 1_000_000

/** Every adversarial frame, in a fixed order. */
export const shapes = (options?: Options): ReadonlyArray<Shape> => lazyShapes(options).map((shape) => shape.build())

/** Every adversarial frame, in a fixed order, each built when asked (and checked against `frameBytes` then). */
export const lazyShapes = (options?: Options): ReadonlyArray<LazyShape> => {
  const frameBytes = options?.frameBytes ?? DefaultFrameBytes
  const commandChars = options?.commandChars ?? DefaultCommandChars
  /** Room for a big value inside a frame (the rest of the frame is small). */
  const room = frameBytes - 1024
  /** The size of one big string value (tool arguments hold as many as fit). */
  const big = Math.min(1024 * 1024, Math.floor(room / 2))
  let nextId = 0
  const out: Array<LazyShape> = []

  /** Register a shape; `make` builds its frame(s) when asked. */
  const shape = (
    name: string,
    target: Target,
    description: string,
    make: (id: number) => Omit<Shape, "name" | "target" | "description">
  ) => {
    const id = nextId++
    out.push({
      name,
      target,
      description,
      build: () => {
        const built: Shape = { name, target, description, ...make(id) }
        if (built.frame.length > frameBytes)
          throw new Error(`adversarial shape ${name} is ${built.frame.length} characters, over ${frameBytes}`)
        return built
      }
    })
  }

  // --- shell: rule evaluation and parsing ------------------------------------------------------
  const commandFrame = (
    name: string,
    description: string,
    command: () => string,
    extra: () => Record<string, unknown> = () => ({}),
    raw: () => Record<string, string> = () => ({})
  ) =>
    shape(name, "shell", description, (id) => {
      const line = command()
      return {
        command: line,
        frame: frameOf(
          id,
          "item/commandExecution/requestApproval",
          {
            threadId: ThreadId,
            turnId: TurnId,
            itemId: ItemId,
            command: line,
            cwd: "/work/repo",
            reason: "adversarial",
            ...extra()
          },
          raw()
        )
      }
    })
  /** A script of about `commandChars`: `head`, `unit` repeated, `tail`. */
  const script = (head: string, unit: string, tail: string) => () =>
    head + fill(unit, commandChars - head.length - tail.length) + tail
  /** `one; one; ...; one` filling the command (for units too long to repeat many times). */
  const sideBySide = (one: string) => () => `${fill(`${one}; `, commandChars - one.length)}${one}`

  commandFrame(
    "sudo-words",
    "sudo followed by ~32,000 words, then `; rm -rf ~` (a runner: every later word may start a command)",
    script("sudo ", "a ", `; ${Payload}`)
  )
  commandFrame(
    "sudo-words-wrapped",
    "the same inside codex's `/bin/bash -lc '...'` wrapper",
    () => `/bin/bash -lc ${quote(script("sudo ", "a ", `; ${Payload}`)().slice(20))}`
  )
  commandFrame(
    "env-assignments",
    "`env A=1 A=1 ...` then the payload (assignments skipped before every start)",
    script("env ", "A=1 ", Payload)
  )
  commandFrame(
    "sudo-eval",
    "`sudo eval eval eval ...`: each start is an eval of all the rest",
    script("sudo ", "eval ", Payload)
  )
  commandFrame(
    "eval-chain",
    "`eval eval ... rm -rf ~`: nesting far deeper than is followed",
    script("", "eval ", Payload)
  )
  commandFrame(
    "sudo-shells",
    "`sudo bash -c x bash -c x ...`: a shell script at every third word",
    script("sudo ", `bash -c ${quote("x")} `, `bash -c ${quote(Payload)}`)
  )
  commandFrame(
    "shell-flags",
    "`sudo bash -x -x ... -c 'rm -rf ~'`: a shell's flags before its script",
    script("sudo bash ", "-x ", `-c ${quote(Payload)}`)
  )
  commandFrame(
    "nested-bash",
    "`bash -c` nested by quoting as deep as fits (each level quadruples the quotes), the payload innermost",
    () => {
      let levels = 1
      while (nestedBash(levels + 1, Payload).length <= commandChars) levels++
      return nestedBash(levels, Payload)
    }
  )
  commandFrame(
    "nested-bash-wide",
    "`bash -c '...'` 6 levels deep, repeated side by side",
    sideBySide(nestedBash(6, `true; ${Payload}`))
  )
  commandFrame("many-segments", "`true; true; ...` (~13,000 segments), the payload last", script("", "true; ", Payload))
  commandFrame("many-pipes", "`a|a|a|...` (~32,000 segments), the payload last", script("", "a|", Payload))
  commandFrame(
    "deep-substitution",
    "`$($($(...` ~21,000 levels deep, never closed, the payload inside",
    script("echo ", "$(", Payload)
  )
  commandFrame("deep-substitution-closed", "`$($(...)))` ~11,000 levels, closed, then `; rm -rf ~`", () => {
    const depth = Math.floor((commandChars - 40) / 3)
    return `echo ${"$(".repeat(depth)}true${")".repeat(depth)}; ${Payload}`
  })
  commandFrame(
    "sibling-substitutions",
    "`echo $(a) $(a) ...` then `$(rm -rf ~)`",
    script("echo ", "$(a) ", `$(${Payload})`)
  )
  commandFrame("backticks", "`echo \\`a\\` \\`a\\` ...` then the payload", script("echo ", "`a` ", `; ${Payload}`))
  commandFrame("heredocs", "`cat <<A <<A ...` (~6,000 here-documents) with their bodies, then the payload", () => {
    const n = Math.floor((commandChars - 20) / 8)
    return `cat ${"<<A ".repeat(n)}\n${"A\n".repeat(n)}${Payload}`
  })
  commandFrame("herestrings", "`bash <<< 'bash <<< ...'` nested 6 levels, side by side", () => {
    let inner = Payload
    for (let i = 0; i < 6; i++) inner = `bash <<< ${quote(inner)}`
    return sideBySide(inner)()
  })
  commandFrame(
    "one-long-word",
    "a single 64 KB quoted word, then the payload",
    () => `echo '${"a".repeat(commandChars - 30)}'; ${Payload}`
  )
  commandFrame(
    "unterminated-quote",
    '`echo "` and 64 KB of escaped quotes, never closed (no payload: all of it is one word)',
    script('echo "', '\\" ', "")
  )
  commandFrame(
    "over-limit",
    "a command line of the whole frame (longer than rules read)",
    () => fill("a ", room) + Payload
  )
  commandFrame(
    "reason-assignments",
    "a short command whose `reason` is the whole frame of `a=a=a...`",
    () => "ls",
    () => ({ reason: fill("a=", room) })
  )
  commandFrame(
    "command-actions",
    "a short command with `commandActions`, an array of ~8 million numbers (decode)",
    () => "ls",
    () => ({
      commandActions: "__ACTIONS__"
    }),
    () => ({ __ACTIONS__: `[${fill("1,", room - 256)}1]` })
  )
  commandFrame(
    "network-amendments",
    "a short command whose `proposedNetworkPolicyAmendments` are ~600,000 objects (decode)",
    () => "ls",
    () => ({
      proposedNetworkPolicyAmendments: "__AMENDMENTS__"
    }),
    () => ({ __AMENDMENTS__: `[${fill('{"host":"a","action":"allow"},', room - 256)}{"host":"b","action":"allow"}]` })
  )
  shape(
    "legacy-exec-argv",
    "shell",
    "execCommandApproval with an argv of the whole frame (~3.3 million words)",
    (id) => ({
      frame: frameOf(
        id,
        "execCommandApproval",
        {
          conversationId: ThreadId,
          callId: ItemId,
          command: "__ARGV__",
          cwd: "/work/repo",
          reason: null
        },
        { __ARGV__: `["sudo",${fill('"a",', room - 64)}"rm","-rf","~"]` }
      )
    })
  )

  // --- mask: the masking scans -----------------------------------------------------------------
  const mcpToolCall = (
    name: string,
    description: string,
    toolParams: () => string,
    target: Target = "mask",
    raw: () => Record<string, string> = () => ({})
  ) =>
    shape(name, target, description, (id) => ({
      frame: frameOf(
        id,
        "mcpServer/elicitation/request",
        {
          threadId: ThreadId,
          turnId: TurnId,
          serverName: "probe",
          mode: "form",
          message: 'Allow the probe server to run tool "poke"?',
          requestedSchema: { type: "object", properties: {} },
          _meta: {
            codex_approval_kind: "mcp_tool_call",
            tool_name: "poke",
            tool_params: "__PARAMS__",
            many: "__MANY__"
          }
        },
        { __PARAMS__: toolParams(), __MANY__: "0", ...raw() }
      )
    }))
  /** Tool params: one `value` per key, as many keys as fill the frame. */
  const manyValues = (value: () => string) => () => {
    const v = JSON.stringify(value())
    return `{${upTo(room - 2, (i) => `"k${i}":${v}`)}}`
  }
  mcpToolCall(
    "mcp-assignments",
    "MCP tool arguments: 1 MiB strings of `a=a=a...` (every `=` starts a candidate pair)",
    manyValues(() => fill("a=", big))
  )
  mcpToolCall(
    "mcp-secret-assignments",
    "1 MiB strings of `token=token=...` (every pair secret)",
    manyValues(() => fill("token=", big))
  )
  mcpToolCall(
    "mcp-dotted-keys",
    "1 MiB strings of `a.a.a.a...` (a key candidate at every dot)",
    manyValues(() => fill("a.", big))
  )
  mcpToolCall(
    "mcp-flags",
    "1 MiB strings of `--x --x --x ...`",
    manyValues(() => fill("--x ", big))
  )
  mcpToolCall(
    "mcp-flag-values",
    "1 MiB strings of `--x a --x a ...` (a flag and a value, over and over)",
    manyValues(() => fill("--x a ", big))
  )
  mcpToolCall(
    "mcp-bearer",
    "1 MiB strings of `Bearer Bearer ...`",
    manyValues(() => fill("Bearer ", big))
  )
  mcpToolCall(
    "mcp-headers",
    "1 MiB strings of `authorization: authorization: ...`",
    manyValues(() => fill("authorization: ", big))
  )
  mcpToolCall(
    "mcp-urls",
    "1 MiB strings of `a://a:a://a:...`",
    manyValues(() => fill("a://a:", big))
  )
  mcpToolCall(
    "mcp-token-run",
    "1 MiB strings of one base64-like run",
    manyValues(() => fill("aB3", big))
  )
  mcpToolCall(
    "mcp-blanks",
    "1 MiB strings of `password` and blanks",
    manyValues(() => `password${" ".repeat(big - 8)}`)
  )
  mcpToolCall(
    "mcp-private-keys",
    "1 MiB strings of unterminated private key headers",
    manyValues(() => fill("-----BEGIN PRIVATE KEY-----", big))
  )

  // --- structure: deep and wide JSON -------------------------------------------------------------
  const objects = Math.min(MaxNesting, Math.floor(room / 8))
  const arrays = Math.min(MaxNesting, Math.floor(room / 2) - 16)
  mcpToolCall(
    "mcp-deep-object",
    `MCP tool arguments nested ${objects.toLocaleString("en-US")} objects deep`,
    () => deepObject(objects),
    "structure"
  )
  mcpToolCall(
    "mcp-deep-array",
    `MCP tool arguments nested ${arrays.toLocaleString("en-US")} arrays deep`,
    () => deepArray(arrays),
    "structure"
  )
  mcpToolCall(
    "mcp-wide-object",
    "MCP tool arguments with as many keys as fill the frame",
    () => `{${upTo(room - 2, (i) => `"${i.toString(36)}":1`)}}`,
    "structure"
  )
  mcpToolCall(
    "mcp-many-wide",
    "MCP tool arguments: an array of objects of 20,000 keys each, as many as fill the frame (each costs its keys to read)",
    () => {
      const one = `{${Array.from({ length: 20_000 }, (_, i) => `"k${i}":1`).join(",")}}`
      return `[${upTo(room - 2, () => one)}]`
    },
    "structure"
  )
  mcpToolCall(
    "mcp-wide-array",
    "MCP tool arguments: an array of ~8 million numbers",
    () => `[${fill("1,", room - 2)}1]`,
    "structure"
  )
  mcpToolCall(
    "mcp-wide-nested",
    "100 keys of 100 keys of 100 keys..., every leaf a short string, as many as fill the frame",
    () => {
      let level = JSON.stringify("a")
      // the next level would be 100 copies of this one and its keys: stop before it no longer fits
      while (100 * (level.length + 7) + 2 <= room - 64) {
        const inner = level
        level = `{${Array.from({ length: 100 }, (_, i) => `"k${i}":${inner}`).join(",")}}`
      }
      return level
    },
    "structure"
  )
  mcpToolCall(
    "mcp-wide-meta",
    "an MCP tool call whose `_meta` has as many keys as fill the frame (decode)",
    () => "{}",
    "structure",
    () => ({
      __MANY__: `0,${upTo(room - 512, (i) => `"m${i}":1`)}`
    })
  )
  shape("dynamic-tool-deep", "structure", "item/tool/call whose arguments are deep and wide", (id) => ({
    frame: frameOf(
      id,
      "item/tool/call",
      {
        threadId: ThreadId,
        turnId: TurnId,
        callId: ItemId,
        namespace: null,
        tool: "poke",
        arguments: "__ARGS__"
      },
      {
        __ARGS__: `{"deep":${deepObject(Math.min(MaxNesting, Math.floor(room / 16)))},"wide":[${fill('"a=a",', room / 2 - 8)}"a"]}`
      }
    )
  }))
  shape("mcp-tool-display", "structure", "MCP tool call with ~500,000 `tool_params_display` entries", (id) => ({
    frame: frameOf(
      id,
      "mcpServer/elicitation/request",
      {
        threadId: ThreadId,
        turnId: TurnId,
        serverName: "probe",
        mode: "form",
        message: "Allow?",
        requestedSchema: { type: "object", properties: {} },
        _meta: { codex_approval_kind: "mcp_tool_call", tool_name: "poke", tool_params_display: "__DISPLAY__" }
      },
      { __DISPLAY__: `[${fill('{"name":"a","value":"a=a"},', room - 64)}{}]` }
    )
  }))

  // --- fileChange: many files, big diffs ----------------------------------------------------------
  const changesJson = (count: number, diff: string, lastPath: string) => {
    const last = `{"path":${JSON.stringify(lastPath)},"kind":{"type":"add"},"diff":${diff}}`
    const item = (i: number) =>
      i < count - 1 ? `{"path":"/work/repo/f${i}","kind":{"type":"update"},"diff":${diff}}` : "x".repeat(room)
    return `[${upTo(room - last.length - 200, item)},${last}]`
  }
  const fileChange = (name: string, description: string, count: number, diffChars: number) =>
    shape(name, "fileChange", description, (id) => {
      const diff = JSON.stringify(diffChars > 0 ? fill("+token=a=a=a\n", diffChars) : "")
      return {
        itemStarted: frameOf(
          0,
          "item/started",
          {
            threadId: ThreadId,
            turnId: TurnId,
            item: { type: "fileChange", id: ItemId, status: "inProgress", changes: "__CHANGES__" }
          },
          { __CHANGES__: changesJson(count, diff, "/etc/passwd") }
        ).replace(/^\{"id":0,/, "{"),
        frame: frameOf(id, "item/fileChange/requestApproval", {
          threadId: ThreadId,
          turnId: TurnId,
          itemId: ItemId,
          reason: null,
          grantRoot: null
        })
      }
    })
  fileChange("patch-201-files", "a patch of 201 files, the 201st outside the repository", 201, 0)
  fileChange(
    "patch-many-files",
    "a patch of as many files as fill its item/started (the last outside the repository)",
    Number.MAX_SAFE_INTEGER,
    0
  )
  fileChange(
    "patch-big-diffs",
    "201 files whose diffs fill the item/started (the last outside the repository)",
    201,
    Math.floor(room / 201) - 100
  )
  shape(
    "legacy-patch-many-files",
    "fileChange",
    "applyPatchApproval with as many files as fill the frame (the last outside the repository)",
    (id) => ({
      frame: frameOf(
        id,
        "applyPatchApproval",
        { conversationId: ThreadId, callId: ItemId, fileChanges: "__CHANGES__", reason: null, grantRoot: null },
        {
          __CHANGES__: `{${upTo(room - 256, (i) => `"/work/repo/f${i}":{"add":{"content":""}}`)},"/etc/passwd":{"add":{"content":""}}}`
        }
      )
    })
  )
  shape(
    "legacy-patch-wide-change",
    "fileChange",
    "applyPatchApproval of /etc/passwd whose change has as many keys as fill the frame",
    (id) => ({
      frame: frameOf(
        id,
        "applyPatchApproval",
        { conversationId: ThreadId, callId: ItemId, fileChanges: "__CHANGES__", reason: null, grantRoot: null },
        {
          __CHANGES__: `{"/etc/passwd":{${upTo(room - 256, (i) => `"${i.toString(36)}":{"move_path":"/work/repo/f"}`)}}}`
        }
      )
    })
  )
  shape(
    "permissions-many-paths",
    "fileChange",
    "a permissions request for as many paths as fill the frame (the last is /etc)",
    (id) => ({
      frame: frameOf(
        id,
        "item/permissions/requestApproval",
        {
          threadId: ThreadId,
          turnId: TurnId,
          itemId: ItemId,
          cwd: "/work/repo",
          reason: null,
          permissions: { fileSystem: { write: "__PATHS__" } }
        },
        { __PATHS__: `[${upTo(room - 256, (i) => `"/work/repo/f${i}"`)},"/etc"]` }
      )
    })
  )

  // --- filter: forms, questions, URLs --------------------------------------------------------------
  const elicitation = (
    name: string,
    description: string,
    params: Record<string, unknown>,
    raw: () => Record<string, string>
  ) =>
    shape(name, "filter", description, (id) => ({
      frame: frameOf(
        id,
        "mcpServer/elicitation/request",
        { threadId: ThreadId, turnId: TurnId, serverName: "probe", ...params },
        raw()
      )
    }))
  elicitation(
    "form-many-fields",
    "a form with as many fields as fill half the frame, and a `required` list of the rest",
    {
      mode: "form",
      message: "Fill in",
      requestedSchema: "__SCHEMA__"
    },
    () => ({
      __SCHEMA__: `{"type":"object","properties":{${upTo(room / 2, (i) => `"f${i}":{"type":"string"}`)}},"required":[${fill('"f0",', room / 4)}"f1"]}`
    })
  )
  elicitation(
    "form-many-choices",
    "one field with ~1.4 million choices",
    {
      mode: "form",
      message: "Pick",
      requestedSchema: "__SCHEMA__"
    },
    () => ({
      __SCHEMA__: `{"type":"object","properties":{"colour":{"type":"string","oneOf":[${fill('{"const":"a"},', room - 64)}{"const":"b"}]}}}`
    })
  )
  elicitation(
    "form-wide-field",
    "a form of one field whose schema has as many keys as fill the frame",
    {
      mode: "form",
      message: "Fill in",
      requestedSchema: "__SCHEMA__"
    },
    () => ({
      __SCHEMA__: `{"type":"object","properties":{"f":{"type":"string",${upTo(room - 128, (i) => `"${i.toString(36)}":1`)}}}}`
    })
  )
  shape("user-input-options", "filter", "one question with as many options as fill the frame (decode)", (id) => ({
    frame: frameOf(
      id,
      "item/tool/requestUserInput",
      { threadId: ThreadId, turnId: TurnId, itemId: ItemId, questions: "__QUESTIONS__" },
      {
        __QUESTIONS__: `[{"id":"q","header":"h","question":"pick","options":[${fill('{"label":"l","description":"d"},', room - 256)}{"label":"z","description":"d"}]}]`
      }
    )
  }))
  elicitation(
    "url-many-params",
    "a URL elicitation whose URL is the whole frame of query parameters",
    { mode: "url", message: "Open", url: "__URL__" },
    () => ({
      __URL__: JSON.stringify(`https://example.com/?${fill("a=b&", room - 64)}c=d`)
    })
  )
  shape(
    "user-input-many",
    "filter",
    "a user-input request with as many questions as fill the frame (decode)",
    (id) => ({
      frame: frameOf(
        id,
        "item/tool/requestUserInput",
        { threadId: ThreadId, turnId: TurnId, itemId: ItemId, questions: "__QUESTIONS__" },
        {
          __QUESTIONS__: `[${fill(`{"id":"q","header":"h","question":"${"a=a ".repeat(20)}","options":[{"label":"l","description":"d"}]},`, room - 256)}{"id":"z","header":"h","question":"q"}]`
        }
      )
    })
  )
  shape("unknown-method", "filter", "an unknown method whose name is the whole frame", (id) => ({
    frame: `{"id":${id},"method":${JSON.stringify(fill("a=", room))},"params":{}}`
  }))

  return out
}
