// The inspector page: the store's namespaces, and for each watched
// namespace or prefix its entries and revisions, updated live from the
// watch, with every snapshot, update, closure (and its reason) and refusal
// logged. It talks to the server it was loaded from: GET api/info for the
// namespace list and the store's availability, and the WebSocket at ws for
// everything else. The credential is the page's #token=... fragment (a
// fragment never reaches server logs), sent as a bearer token to api/info
// and as ?access_token= on the WebSocket, which browsers cannot give
// headers.
//
// window.kpInspector exposes the client and the watches to the browser
// tests (and to a curious operator's console).

import {
  StateStoreClient,
  StateStoreError,
  Watch,
  closeReasonName,
  errorCodeName,
  updateKindName,
  type StateEntry,
  type WatchEvent,
} from "./client.js";

interface NamespaceInfo {
  name: string;
  revision: number;
  entries: number;
  bytes: number;
}

interface Info {
  available: boolean;
  cause: string;
  capabilities: string[];
  principal: string;
  namespaces: NamespaceInfo[];
}

const token = new URLSearchParams(location.hash.slice(1)).get("token") ?? "";
const wsURL = new URL("ws", location.href);
wsURL.protocol = location.protocol === "https:" ? "wss:" : "ws:";
wsURL.hash = "";
if (token !== "") wsURL.searchParams.set("access_token", token);

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const decoder = new TextDecoder();

function el(tag: string, attrs: Record<string, string> = {}, ...kids: (Node | string)[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.append(...kids);
  return e;
}

function time(ms: bigint): string {
  return ms === 0n ? "" : new Date(Number(ms)).toISOString().replace("T", " ").replace("Z", "");
}

const client = new StateStoreClient({
  url: wsURL.toString(),
  onConnection: (state, detail) => {
    const c = $("connection");
    c.textContent = detail ? `${state}: ${detail}` : state;
    c.className = "pill " + state;
  },
});

/** One watch panel: header, entry table, event log. */
class Panel {
  readonly root: HTMLElement;
  private readonly meta: HTMLElement;
  private readonly closeLine: HTMLElement;
  private readonly body: HTMLElement;
  private readonly log: HTMLElement;
  /** Every event, in order (the tests read it). */
  readonly events: WatchEvent[] = [];
  readonly watch: Watch;

  constructor(namespace: string, prefix: string) {
    const title = prefix ? `${namespace} · ${prefix}*` : namespace;
    this.meta = el("div", { class: "meta" });
    this.closeLine = el("div", { class: "close-line" });
    this.body = el("tbody");
    this.log = el("div", { class: "log" });
    const remove = el("button", {}, "unwatch");
    this.root = el(
      "section",
      { class: "watch", "data-namespace": namespace, "data-prefix": prefix },
      el("h3", {}, title, " ", remove),
      this.meta,
      this.closeLine,
      el("table", {}, el("thead", {}, el("tr", {}, ...["key", "revision", "owner", "schema", "updated", "expires", "document"].map((h) => el("th", {}, h)))), this.body),
      this.log,
    );
    this.watch = client.watch({ namespace, keyPrefix: prefix, name: namespace.replaceAll("/", "_") }, (_w, e) => this.on(e));
    remove.addEventListener("click", () => {
      this.watch.unwatch().catch((e) => this.line("failed", `unwatch: ${e}`));
      this.root.remove();
      panels.splice(panels.indexOf(this), 1);
    });
    this.render();
  }

  private line(kind: string, text: string): void {
    this.log.prepend(el("div", { class: kind }, text));
    while (this.log.childElementCount > 200) this.log.lastElementChild?.remove();
  }

  private on(e: WatchEvent): void {
    this.events.push(e);
    switch (e.type) {
      case "snapshot":
        this.line("snapshot", `snapshot #${e.snapshots} at revision ${e.revision}: ${e.entries.length} entries`);
        break;
      case "update": {
        const u = e.update;
        this.line("update", `seq ${u.watchSequence} rev ${u.revision} ${updateKindName(u.kind)} ${u.entry?.key ?? u.key}`);
        break;
      }
      case "closed":
        this.line("closed", `closed by the server: ${closeReasonName(e.reason)}: ${e.message}; taking a new snapshot`);
        break;
      case "gap":
        this.line("gap", `sequence gap: expected ${e.expected}, got ${e.got}`);
        break;
      case "resync":
        this.line("resync", `resync: ${e.why}`);
        break;
      case "failed":
        this.line("failed", `watch refused: ${e.error.message}`);
        break;
      case "acked":
        return; // too chatty for the log; the header shows the applied sequence
    }
    this.render();
  }

  private render(): void {
    const w = this.watch;
    this.meta.replaceChildren(
      el("span", { class: "status-" + w.status }, w.status),
      ` · snapshot revision ${w.snapshotRevision} · applied sequence ${w.applied} · snapshots ${w.snapshots} · ${w.entries.size} entries`,
    );
    const parts: HTMLElement[] = [];
    if (w.lastClose) {
      parts.push(el("span", { class: "close-reason" }, closeReasonName(w.lastClose.reason)), el("span", {}, ` ${w.lastClose.message}`));
    }
    if (w.error) parts.push(el("span", { class: "watch-error" }, errorCodeName(w.error.code ?? 0)), el("span", {}, ` ${w.error.message}`));
    this.closeLine.replaceChildren(...parts);
    const rows = [...w.entries.values()].sort((a, b) => (a.key < b.key ? -1 : 1)).map((e: StateEntry) =>
      el("tr", { "data-key": e.key, "data-revision": e.revision.toString() },
        el("td", {}, e.key), el("td", {}, e.revision.toString()), el("td", {}, e.owner), el("td", {}, e.schema),
        el("td", {}, time(e.updatedAtMs)), el("td", {}, time(e.expiresAtMs)), el("td", { class: "doc" }, decoder.decode(e.document))),
    );
    this.body.replaceChildren(...rows);
  }
}

const panels: Panel[] = [];

function watch(namespace: string, prefix = ""): Panel {
  const p = new Panel(namespace, prefix);
  panels.push(p);
  $("watches").append(p.root);
  return p;
}

async function refreshInfo(): Promise<void> {
  let info: Info;
  try {
    const r = await fetch(new URL("api/info", location.href), { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (!r.ok) throw new Error(`api/info: HTTP ${r.status}: ${await r.text()}`);
    info = (await r.json()) as Info;
  } catch (e) {
    $("capability").textContent = String(e);
    return;
  }
  const banner = $("unavailable");
  banner.style.display = info.available ? "none" : "block";
  banner.textContent = info.available ? "" : `The state store is unavailable: ${info.cause}. Every request is answered UNAVAILABLE.`;
  $("capability").textContent = info.capabilities.length ? info.capabilities.join(", ") : "no capability advertised";
  $("principal").textContent = `as ${info.principal}`;
  $("namespaces").replaceChildren(
    ...info.namespaces.map((n) => {
      const tr = el("tr", { "data-namespace": n.name }, el("td", {}, n.name), el("td", {}, String(n.revision)), el("td", {}, String(n.entries)));
      tr.addEventListener("click", () => watch(n.name));
      return tr;
    }),
  );
}

$("watch-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target as HTMLFormElement);
  watch(String(f.get("namespace")).trim(), String(f.get("prefix") ?? "").trim());
});

$("write-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target as HTMLFormElement);
  const op = ((ev as SubmitEvent).submitter as HTMLButtonElement | null)?.value ?? "put";
  const namespace = String(f.get("namespace")).trim();
  const key = String(f.get("key")).trim();
  const exp = String(f.get("expected") ?? "").trim();
  const expectedRevision = exp === "" ? undefined : BigInt(exp);
  const out = $("result");
  try {
    if (op === "get") {
      const e = await client.get(namespace, key);
      out.textContent = `revision ${e.revision} by ${e.owner}: ${decoder.decode(e.document)}`;
    } else if (op === "delete") {
      out.textContent = `deleted at revision ${await client.delete({ namespace, key, expectedRevision })}`;
    } else {
      const e = await client.put({ namespace, key, schema: String(f.get("schema")), document: String(f.get("document")), expectedRevision });
      out.textContent = `written at revision ${e.revision}`;
    }
  } catch (e) {
    const se = e as StateStoreError;
    out.textContent = se.code !== undefined && se.currentRevision ? `${se.message} (current revision ${se.currentRevision})` : String(se.message ?? e);
  }
  void refreshInfo();
});

declare global {
  interface Window {
    kpInspector: { client: StateStoreClient; panels: Panel[]; watch: typeof watch; refreshInfo: typeof refreshInfo };
  }
}
window.kpInspector = { client, panels, watch, refreshInfo };

client.connect();
void refreshInfo();
setInterval(() => void refreshInfo(), 2000);
for (const w of new URLSearchParams(location.hash.slice(1)).getAll("watch")) {
  const [ns, prefix] = w.split("|");
  if (ns) watch(ns, prefix ?? "");
}
