/**
 * The web inbox's page: one HTML document and one plain ES module, served by the inbox itself
 * (no build step, nothing downloaded). The page reads the token from its URL fragment
 * (`#token=...`, never sent to the server), keeps it in the tab's sessionStorage and removes it
 * from the address bar; it sends it in the `X-Warden-Token` header on every call, the event stream
 * included (read with `fetch`, so the token is in no URL). Everything the server sends is put on
 * the page as text (`textContent`), never as HTML.
 */

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** The page, titled `title`. */
export const html = (title: string): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)} · inbox</title>
<style>
  :root { color-scheme: light dark; --muted: #777; --line: #8884; --accept: #1a7f37; --decline: #b42318; }
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem; }
  header { display: flex; justify-content: space-between; align-items: baseline; gap: 1rem; }
  h1 { font-size: 1.2rem; margin: 0; } h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
  #status { color: var(--muted); font-size: .9rem; } #status[data-state="live"] { color: var(--accept); }
  #status[data-state="denied"] { color: var(--decline); font-weight: 600; }
  table { border-collapse: collapse; width: 100%; font-size: .9rem; }
  th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .card { border: 1px solid var(--line); border-radius: .5rem; padding: .6rem .8rem; margin: .5rem 0; }
  .card .head { display: flex; justify-content: space-between; gap: 1rem; color: var(--muted); font-size: .85rem; }
  .card .title { margin: .3rem 0 .5rem; font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-word; }
  .countdown { font-variant-numeric: tabular-nums; } .countdown.soon { color: var(--decline); font-weight: 600; }
  .buttons { display: flex; flex-wrap: wrap; gap: .4rem; }
  button { font: inherit; padding: .3rem .8rem; border-radius: .35rem; border: 1px solid var(--line); cursor: pointer; }
  button[data-decision="accept"], button[data-decision="acceptForSession"], button[data-decision="always"] { border-color: var(--accept); }
  button[data-decision="decline"], button[data-decision="cancel"] { border-color: var(--decline); }
  pre.details { background: #8881; padding: .5rem; overflow-x: auto; font-size: .85rem; }
  .answer textarea { width: 100%; min-height: 4rem; font-family: ui-monospace, monospace; }
  .error { color: var(--decline); }
  #decided li { font-size: .9rem; } #decided .outcome { font-weight: 600; }
  .empty { color: var(--muted); }
</style>
</head>
<body>
<header><h1>${escapeHtml(title)} · approval inbox</h1><span id="status" data-state="connecting">connecting…</span></header>
<h2>Open cards</h2>
<div id="cards"><p class="empty">No open card.</p></div>
<h2>Work items</h2>
<table><thead><tr><th>item</th><th>status</th><th>tokens</th><th>elapsed</th><th>activity</th></tr></thead><tbody id="items"></tbody></table>
<h2>Decided</h2>
<ul id="decided"></ul>
<script type="module" src="inbox.js"></script>
</body>
</html>
`

/** The page's module (ASCII only: the CLI's bundle must be; `\u2026` is an escape the browser reads). */
export const script = String.raw`// Warden web inbox: plain ES module, no dependencies.
const fragment = new URLSearchParams(location.hash.slice(1))
let token = fragment.get("token") ?? sessionStorage.getItem("warden-token") ?? ""
if (fragment.has("token")) {
  sessionStorage.setItem("warden-token", token)
  history.replaceState(null, "", location.pathname)
}
const $ = (id) => document.getElementById(id)
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v)
    else node.setAttribute(k, v)
  }
  for (const c of children) node.append(c)
  return node
}
const state = { cards: new Map(), items: new Map(), skew: 0, always: false }
const setStatus = (s, text) => { $("status").dataset.state = s; $("status").textContent = text }
const api = async (path, init = {}) => {
  const res = await fetch(path, { ...init, headers: { ...(init.headers ?? {}), "x-warden-token": token, "content-type": "application/json" }, cache: "no-store" })
  if (res.status === 401) { setStatus("denied", "wrong or missing token: open the link Warden printed"); throw new Error("401") }
  const body = res.headers.get("content-type")?.includes("json") ? await res.json() : undefined
  return { status: res.status, body }
}
const labels = { accept: "accept", acceptForSession: "accept for session", decline: "decline", cancel: "cancel", always: "always" }
const fmtMs = (ms) => {
  if (ms <= 0) return "0s"
  const s = Math.ceil(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60
  return (h ? h + "h" : "") + (h || m ? String(m).padStart(h ? 2 : 1, "0") + "m" : "") + String(r).padStart(h || m ? 2 : 1, "0") + "s"
}
const now = () => Date.now() + state.skew

function noteDecided(cardId, line, kind) {
  $("decided").querySelector('[data-settled="' + CSS.escape(cardId) + '"]')?.remove()
  const li = el("li", { "data-settled": cardId, "data-kind": kind })
  li.append(el("span", { text: cardId + ": " }), el("span", { class: "outcome", text: line }))
  $("decided").prepend(li)
}

// A rule offered with this page's acceptance: shown in full with its replay; kept only on a click.
function showOffer(cardId, offer) {
  const li = $("decided").querySelector('[data-settled="' + CSS.escape(cardId) + '"]')
  if (!li) return
  const note = el("span", { class: "offer-note" })
  const take = el("button", { "data-action": "take-offer", text: "keep this rule" })
  const box = el("div", { class: "offer", "data-offer": offer.id },
    el("p", { text: "Keep a rule? " + offer.summary }),
    el("pre", { class: "details", text: offer.rule }),
    el("p", { class: "replay", text: "Replayed over " + offer.replay.cards + " recorded cards: it decides " + offer.replay.decides + ", would have saved " + offer.replay.savedAsks + " asks, and flips " + offer.replay.flippedDenials + " recorded declines." }),
    take, " ", note)
  take.addEventListener("click", async () => {
    take.disabled = true
    try {
      const { status, body } = await api("api/offers/" + encodeURIComponent(offer.id), { method: "POST" })
      if (status === 200) { note.textContent = "remembered " + body.ruleId + ": allow " + body.describe; box.dataset.taken = body.ruleId }
      else { note.textContent = body?.reason ?? "not remembered (HTTP " + status + ")"; take.disabled = false }
    } catch (e) { note.textContent = "not remembered: " + e.message; take.disabled = false }
  })
  li.append(box)
}

function removeCard(cardId) {
  state.cards.get(cardId)?.node.remove()
  state.cards.delete(cardId)
  if (state.cards.size === 0 && !$("cards").querySelector(".empty")) $("cards").append(el("p", { class: "empty", text: "No open card." }))
}

async function decide(card, decision, errorNode) {
  errorNode.textContent = ""
  for (const b of card.node.querySelectorAll("button[data-decision]")) b.disabled = true
  // While this page's answer is on its way, the stream's word on the card waits for it: the answer says who won.
  card.pending = true
  card.heard = undefined
  try {
    const { status, body } = await api("api/cards/" + encodeURIComponent(card.id) + "/decision", { method: "POST", body: JSON.stringify({ decision }) })
    if (status === 200) {
      noteDecided(card.id, body.settlement.outcome + " by " + body.settlement.by + " (you)", "mine")
      removeCard(card.id)
      if (body.offer) showOffer(card.id, body.offer)
    } else if (status === 409 && body?._tag === "AlreadySettled") {
      noteDecided(card.id, "already " + body.settlement.outcome + " by " + body.settlement.by + "; your answer changed nothing", "late")
      removeCard(card.id)
    } else if (status === 404) {
      noteDecided(card.id, "no longer known to Warden", "gone")
      removeCard(card.id)
    } else {
      errorNode.textContent = body?.reason ?? "not decided (HTTP " + status + ")"
      reopen(card)
    }
  } catch (e) {
    errorNode.textContent = "not decided: " + e.message + " (the card stays open; try again)"
    reopen(card)
  } finally {
    card.pending = false
  }
}

function reopen(card) {
  card.pending = false
  if (card.heard) {
    noteDecided(card.id, card.heard.outcome + " by " + card.heard.by, "elsewhere")
    removeCard(card.id)
    return
  }
  for (const b of card.node.querySelectorAll("button[data-decision]")) b.disabled = false
}

function addCard(brief) {
  if (state.cards.has(brief.id)) return
  $("cards").querySelector(".empty")?.remove()
  const countdown = el("span", { class: "countdown" })
  const error = el("div", { class: "error", role: "alert" })
  const details = el("pre", { class: "details", hidden: "" })
  const card = { ...brief, countdown, node: null }
  const buttons = el("div", { class: "buttons" })
  for (const word of brief.offers) {
    buttons.append(el("button", { type: "button", "data-decision": word, text: labels[word] ?? word, onclick: () => decide(card, word, error) }))
  }
  const toggle = el("button", { type: "button", "data-action": "details", text: "details", onclick: async () => {
    if (!details.hidden) { details.hidden = true; toggle.textContent = "details"; return }
    try {
      const { status, body } = await api("api/cards/" + encodeURIComponent(brief.id))
      details.textContent = status === 200 ? body.details.join("\n") : "(not available)"
    } catch (e) { details.textContent = "(not available: " + e.message + ")" }
    details.hidden = false
    toggle.textContent = "hide details"
  } })
  buttons.append(toggle)
  const structured = ["userInput", "elicitation", "permissions", "mcpToolCall", "dynamicTool"].includes(brief.kind)
  const extra = []
  if (structured) {
    const text = el("textarea", { "aria-label": "structured answer (JSON)", placeholder: brief.kind === "userInput" ? '{"answers": {"q1": ["yes"]}}' : brief.kind === "permissions" ? '{"permissions": {...}, "scope": "turn"}' : '{"action": "accept", "content": {...}}' })
    const send = el("button", { type: "button", "data-decision": "structured", text: "send answer", onclick: () => {
      let value
      try { value = JSON.parse(text.value) } catch (e) { error.textContent = "not JSON: " + e.message; return }
      decide(card, value, error)
    } })
    extra.push(el("details", { class: "answer" }, el("summary", { text: "structured answer" }), text, send))
  }
  card.node = el("div", { class: "card", "data-card": brief.id, "data-kind": brief.kind },
    el("div", { class: "head" },
      el("span", { text: brief.id + " \u00b7 item " + (brief.item ?? "?") + " \u00b7 " + brief.kind }),
      el("span", {}, "refused in ", countdown)),
    el("div", { class: "title", text: brief.title }),
    buttons, ...extra, details, error)
  state.cards.set(brief.id, card)
  const list = [...state.cards.values()].sort((a, b) => a.openedAt - b.openedAt)
  $("cards").append(...list.map((c) => c.node))
  tick()
}

function renderItems() {
  const rows = [...state.items.values()].sort((a, b) => String(a.item).localeCompare(String(b.item), undefined, { numeric: true }))
  $("items").replaceChildren(...rows.map((i) => el("tr", { "data-item": String(i.item), "data-status": i.status },
    el("td", { text: String(i.item) + (i.prompt ? " " + (i.prompt.length > 40 ? i.prompt.slice(0, 40) + "\u2026" : i.prompt) : "") }),
    el("td", { text: i.status }),
    el("td", { class: "num", text: i.tokens == null ? "" : String(i.tokens) }),
    el("td", { class: "num elapsed", "data-started": i.startedAt ?? "", "data-finished": i.finishedAt ?? "" }),
    el("td", { text: i.activity }))))
  tick()
}

function tick() {
  const t = now()
  for (const card of state.cards.values()) {
    const left = card.deadlineAt === null ? Infinity : card.deadlineAt - t
    card.countdown.textContent = card.deadlineAt === null ? "no deadline" : fmtMs(left)
    card.countdown.classList.toggle("soon", left < 30000)
  }
  for (const cell of document.querySelectorAll("td.elapsed")) {
    const started = Number(cell.dataset.started), finished = Number(cell.dataset.finished)
    cell.textContent = started ? fmtMs((finished || t) - started) : ""
  }
}
setInterval(tick, 250)

function onMessage(event, data) {
  switch (event) {
    case "hello":
      state.skew = data.now - Date.now()
      state.always = data.always
      for (const id of [...state.cards.keys()]) if (!data.cards.some((c) => c.id === id)) removeCard(id)
      for (const c of data.cards) addCard(c)
      state.items = new Map(data.items.map((i) => [String(i.item), i]))
      renderItems()
      setStatus("live", "live")
      break
    case "card.opened":
      addCard(data)
      break
    case "card.settled":
      if (state.cards.get(data.cardId)?.pending) state.cards.get(data.cardId).heard = data
      else if (state.cards.has(data.cardId)) {
        noteDecided(data.cardId, data.outcome + " by " + data.by, "elsewhere")
        removeCard(data.cardId)
      }
      break
    case "item.updated":
      state.items.set(String(data.item), data)
      renderItems()
      break
  }
}

async function listen() {
  for (;;) {
    try {
      const res = await fetch("api/events", { headers: { "x-warden-token": token }, cache: "no-store" })
      if (res.status === 401) { setStatus("denied", "wrong or missing token: open the link Warden printed"); return }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffer = ""
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buffer += value
        let cut
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const chunk = buffer.slice(0, cut)
          buffer = buffer.slice(cut + 2)
          let event = "message", data = ""
          for (const line of chunk.split("\n")) {
            if (line.startsWith("event: ")) event = line.slice(7)
            else if (line.startsWith("data: ")) data += line.slice(6)
          }
          if (data !== "") onMessage(event, JSON.parse(data))
        }
      }
    } catch (e) {
      // reconnect below
    }
    setStatus("connecting", "disconnected; reconnecting\u2026")
    await new Promise((r) => setTimeout(r, 1000))
  }
}
listen()
`
