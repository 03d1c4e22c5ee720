// The KeepPeek state store's browser client: keeppeek.statestore.v1 over one
// WebSocket, one encoded ClientMessage or ServerMessage per binary message.
//
// Reads and writes: get, put and delete with compare-and-set
// (expectedRevision absent = blind, 0n = create only, N = only at revision
// N). A failed request rejects with a StateStoreError carrying the code,
// the field at fault and, for CONFLICT, the current revision. Requests are
// never retried here: a writer that lost a compare-and-set rereads and
// merges, and a blind write is never repeated behind its caller's back.
//
// Several URLs (the nodes of a cluster) may be given: the client talks to
// one at a time, and when that connection closes, or a watch on it is
// closed UNAVAILABLE (its node lost the cluster's leader), it moves to the
// next URL, round-robin, and every watch takes a new snapshot there, as the
// Go client (client/) does. Writes sent to any node are forwarded to the
// leader, so no URL is preferred.
//
// Watches follow the specification's client rules:
//   - the snapshot is installed first, replacing the cached keys at once;
//   - an update is applied only when its watch_sequence is exactly one above
//     the highest applied;
//   - a sequence gap, a StateStoreWatchClosed, a rejected update, or a
//     disconnect means "unwatch (when the connection still stands) and take
//     a new snapshot"; the cached keys stay until the new snapshot replaces
//     them, and no state is ever invented to fill a gap;
//   - a closure UNAVAILABLE comes from a cluster node that lost its leader
//     and refuses new watches until one is back: with several URLs the
//     client leaves that node (every watch on it is told the same closure,
//     calls in flight fail as for a lost connection) and re-snapshots at the
//     next URL; with one URL the new snapshot is asked for after the
//     reconnect delay, and a refusal UNAVAILABLE of it is retried the same
//     way instead of failing the watch;
//   - what was applied is acknowledged with WatchStateAck naming the highest
//     contiguously applied sequence (at most one ack in flight per watch;
//     the next one names the newest sequence, so acks keep up with any rate).
// A watch whose WatchState is refused (WATCH_LIMIT, WATCH_TOO_BROAD,
// PERMISSION_DENIED, ...) fails with that error and is not retried: the
// caller must narrow it or remove another watch.

import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ClientMessageSchema,
  ServerMessageSchema,
  StateStoreErrorCode,
  StateStoreWatchCloseReason,
  StateStoreWatchUpdateKind,
  type ServerMessage,
  type StateEntry,
  type StateStoreResult,
  type StateStoreWatchUpdate,
} from "./gen/keeppeek/statestore/v1/state_store_pb.js";

export { StateStoreErrorCode, StateStoreWatchCloseReason, StateStoreWatchUpdateKind };
export type { StateEntry, StateStoreWatchUpdate };

/** The short name of an error code, as the specification spells it after STATE_STORE_ERROR_CODE_. */
export function errorCodeName(code: StateStoreErrorCode): string {
  return StateStoreErrorCode[code] ?? `CODE_${code}`;
}

/** The short name of a close reason (BUFFER_OVERFLOW, ACK_TIMEOUT, ...). */
export function closeReasonName(r: StateStoreWatchCloseReason): string {
  return StateStoreWatchCloseReason[r] ?? `REASON_${r}`;
}

/** The short name of an update kind (PUT, DELETE, EXPIRE). */
export function updateKindName(k: StateStoreWatchUpdateKind): string {
  return StateStoreWatchUpdateKind[k] ?? `KIND_${k}`;
}

/** A refused request, as the server answered it (or DISCONNECTED locally). */
export class StateStoreError extends Error {
  /** The server's code, or undefined for a local failure (the connection dropped). */
  readonly code: StateStoreErrorCode | undefined;
  /** The request field or bound at fault. */
  readonly field: string;
  /** The entry's current revision, for CONFLICT. */
  readonly currentRevision: bigint;

  constructor(code: StateStoreErrorCode | undefined, field: string, message: string, currentRevision = 0n) {
    super(code === undefined ? message : `${errorCodeName(code)} (${field}): ${message}`);
    this.name = "StateStoreError";
    this.code = code;
    this.field = field;
    this.currentRevision = currentRevision;
  }
}

/** Connection states reported to ClientOptions.onConnection. */
export type ConnectionState = "connecting" | "open" | "closed";

export interface ClientOptions {
  /**
   * The WebSocket URL (ws:// or wss://), credentials included as the server
   * expects; or several, the nodes of one cluster, tried in turn from the
   * first.
   */
  url: string | readonly string[];
  /** First reconnect delay (default 250 ms); doubles up to maxReconnectDelayMs. */
  reconnectDelayMs?: number;
  /** Longest reconnect delay (default 5000 ms). */
  maxReconnectDelayMs?: number;
  /** Called on every connection state change, with the reason of a closure. */
  onConnection?: (state: ConnectionState, detail: string) => void;
}

export interface PutRequest {
  namespace: string;
  key: string;
  schema: string;
  /** The JSON document: bytes, a JSON string, or a value to JSON-encode. */
  document: Uint8Array | string | object;
  /** Absent: blind replacement. 0n: create only. N: only when the entry's revision is N. */
  expectedRevision?: bigint;
  /** Lease in milliseconds; 0 or absent means none. */
  ttlMs?: number;
}

export interface DeleteRequest {
  namespace: string;
  key: string;
  expectedRevision?: bigint;
}

export interface WatchSpec {
  namespace: string;
  keyPrefix?: string;
  /** A readable name; the wire watch_id is derived from it per snapshot. */
  name?: string;
}

/** What a Watch reports as it goes. */
export type WatchEvent =
  | { type: "snapshot"; revision: bigint; entries: StateEntry[]; snapshots: number }
  | { type: "update"; update: StateStoreWatchUpdate }
  | { type: "closed"; reason: StateStoreWatchCloseReason; message: string }
  | { type: "gap"; expected: bigint; got: bigint }
  | { type: "resync"; why: string }
  | { type: "failed"; error: StateStoreError }
  | { type: "acked"; sequence: bigint };

type WatchStatus = "pending" | "live" | "resyncing" | "failed" | "removed";

const encoder = new TextEncoder();

function documentBytes(d: Uint8Array | string | object): Uint8Array {
  if (d instanceof Uint8Array) return d;
  return encoder.encode(typeof d === "string" ? d : JSON.stringify(d));
}

interface Pending {
  resolve: (m: ServerMessage) => void;
  reject: (e: StateStoreError) => void;
}

/**
 * One session with the store. It reconnects on its own after a disconnect
 * and re-watches every live watch with a new snapshot.
 */
export class StateStoreClient {
  private readonly opts: Required<Omit<ClientOptions, "onConnection" | "url">> & Pick<ClientOptions, "onConnection">;
  private readonly urls: readonly string[];
  /** The index in urls of the current connection, or of the next one to try. */
  private at = 0;
  private ws: WebSocket | undefined;
  private nextRequest = 1n;
  private readonly pending = new Map<bigint, Pending>();
  private readonly watches = new Set<Watch>();
  /** The watch each wire watch_id belongs to, for the current snapshot only. */
  private readonly byWireId = new Map<string, Watch>();
  private delay: number;
  private stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private state: ConnectionState = "closed";

  constructor(opts: ClientOptions) {
    this.urls = typeof opts.url === "string" ? [opts.url] : [...opts.url];
    if (this.urls.length === 0) throw new StateStoreError(undefined, "url", "at least one WebSocket URL is required");
    this.opts = {
      reconnectDelayMs: opts.reconnectDelayMs ?? 250,
      maxReconnectDelayMs: opts.maxReconnectDelayMs ?? 5000,
      onConnection: opts.onConnection,
    };
    this.delay = this.opts.reconnectDelayMs;
  }

  /** The connection's state. */
  get connection(): ConnectionState {
    return this.state;
  }

  /** The URL of the current connection (while disconnected, the next one tried). */
  get url(): string {
    return this.urls[this.at];
  }

  /** Opens the connection; after a disconnect it is reopened with backoff until close(). */
  connect(): void {
    this.stopped = false;
    if (this.ws) return;
    this.setState("connecting", "");
    const ws = new WebSocket(this.urls[this.at]);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onopen = () => {
      this.delay = this.opts.reconnectDelayMs;
      this.setState("open", "");
      for (const w of this.watches) w.start();
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (!(ev.data instanceof ArrayBuffer)) return; // the server sends binary messages only
      let m: ServerMessage;
      try {
        m = fromBinary(ServerMessageSchema, new Uint8Array(ev.data));
      } catch (e) {
        // A message that does not decode may have been a watch update: every
        // watch must assume it missed one.
        for (const w of this.watches) w.resync(`undecodable server message: ${e}`);
        return;
      }
      this.dispatch(m);
    };
    ws.onclose = (ev: CloseEvent) => {
      this.lost(ws, `connection closed (${ev.code}${ev.reason ? ": " + ev.reason : ""})`);
    };
  }

  /**
   * Ends ws as the current connection: its calls fail, its watches wait
   * for a new snapshot, and the client reconnects after the delay, to the
   * next URL.
   */
  private lost(ws: WebSocket, why: string): void {
    if (this.ws !== ws) return;
    this.ws = undefined;
    this.failPending(why);
    this.byWireId.clear();
    for (const w of this.watches) w.disconnected(why);
    this.at = (this.at + 1) % this.urls.length;
    this.setState("closed", why);
    if (!this.stopped) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.connect();
      }, this.delay);
      this.delay = Math.min(this.delay * 2, this.opts.maxReconnectDelayMs);
    }
  }

  /**
   * Leaves the current node after it closed a watch UNAVAILABLE: it lost
   * its cluster's leader and refuses new watches, writes and linearizable
   * reads until one is back, so every watch moves to the next URL. The
   * node closes all its watches at once, but nothing more is read from it:
   * each other watch is told the same closure here, so its lastClose
   * names UNAVAILABLE rather than a bare disconnect.
   */
  private leave(reason: StateStoreWatchCloseReason, message: string): void {
    const ws = this.ws;
    if (!ws) return;
    const others = [...this.byWireId.values()];
    this.byWireId.clear();
    for (const w of others) w.closed(reason, message, true);
    ws.onmessage = null;
    ws.onclose = null;
    ws.close(4001, "watch closed UNAVAILABLE: moving to another node");
    this.lost(ws, `${this.urls[this.at]} closed a watch UNAVAILABLE (${message}): moving to the next URL`);
  }

  /** Closes the connection for good; the server removes the session's watches. */
  close(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.ws?.close(1000, "client closed");
  }

  /**
   * Drops the connection as a network failure would (test hook): the client
   * reconnects and re-watches with new snapshots.
   */
  dropConnection(): void {
    this.ws?.close(4000, "dropped by the client");
  }

  private setState(s: ConnectionState, detail: string): void {
    this.state = s;
    this.opts.onConnection?.(s, detail);
  }

  private failPending(why: string): void {
    const err = new StateStoreError(undefined, "connection", why);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /** Sends a request and resolves with its answer (any ServerMessage kind). */
  private request(build: (id: bigint) => MessageInitShape<typeof ClientMessageSchema>["message"]): Promise<ServerMessage> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new StateStoreError(undefined, "connection", "not connected"));
    }
    const id = this.nextRequest++;
    const msg = create(ClientMessageSchema, { message: build(id) });
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      ws.send(toBinary(ClientMessageSchema, msg));
    });
  }

  private dispatch(m: ServerMessage): void {
    switch (m.message.case) {
      case "result":
      case "ackResult": {
        const id = m.message.value.requestId;
        const p = this.pending.get(id);
        if (p) {
          this.pending.delete(id);
          p.resolve(m);
        } else if (id === 0n && m.message.case === "result" && m.message.value.result.case === "error") {
          // An answer the server could not attribute: something we sent
          // was malformed. Any watch may have lost an ack.
          const e = m.message.value.result.value;
          for (const w of this.watches) w.resync(`server refused a message: ${e.field}: ${e.message}`);
        }
        return;
      }
      case "watchUpdate": {
        this.byWireId.get(m.message.value.watchId)?.update(m.message.value);
        return;
      }
      case "watchClosed": {
        const c = m.message.value;
        const w = this.byWireId.get(c.watchId);
        const leave = c.reason === StateStoreWatchCloseReason.UNAVAILABLE && this.urls.length > 1;
        if (w) {
          this.byWireId.delete(c.watchId);
          w.closed(c.reason, c.message, leave);
        }
        if (leave) this.leave(c.reason, c.message);
        return;
      }
    }
  }

  /** Reads the complete current entry. */
  async get(namespace: string, key: string): Promise<StateEntry> {
    const m = await this.request((requestId) => ({ case: "getState", value: { requestId, namespace, key } }));
    return entryOf(expectResult(m));
  }

  /** Replaces (or creates) an entry, with compare-and-set when expectedRevision is set. */
  async put(req: PutRequest): Promise<StateEntry> {
    const m = await this.request((requestId) => ({
      case: "putState",
      value: {
        requestId,
        namespace: req.namespace,
        key: req.key,
        schema: req.schema,
        document: documentBytes(req.document),
        expectedRevision: req.expectedRevision,
        ttlMs: BigInt(req.ttlMs ?? 0),
      },
    }));
    return entryOf(expectResult(m));
  }

  /** Removes an entry; resolves with the revision the deletion produced. */
  async delete(req: DeleteRequest): Promise<bigint> {
    const m = await this.request((requestId) => ({
      case: "deleteState",
      value: { requestId, namespace: req.namespace, key: req.key, expectedRevision: req.expectedRevision },
    }));
    const r = expectResult(m);
    if (r.result.case !== "deletedRevision") throw unexpected(r);
    return r.result.value;
  }

  /** Starts a watch; it follows the client rules until unwatch() or a refusal. */
  watch(spec: WatchSpec, onEvent: (w: Watch, e: WatchEvent) => void): Watch {
    const w = new Watch(this, spec, onEvent);
    this.watches.add(w);
    if (this.state === "open") w.start();
    return w;
  }

  /** @internal */
  watchState(w: Watch, wireId: string): Promise<ServerMessage> {
    this.byWireId.set(wireId, w);
    return this.request((requestId) => ({
      case: "watchState",
      value: { requestId, watchId: wireId, namespace: w.spec.namespace, keyPrefix: w.spec.keyPrefix ?? "" },
    }));
  }

  /** @internal Removes the wire watch: its later messages are ignored. */
  unwatchState(wireId: string): Promise<ServerMessage> {
    this.byWireId.delete(wireId);
    return this.request((requestId) => ({ case: "unwatchState", value: { requestId, watchId: wireId } }));
  }

  /** @internal */
  ack(wireId: string, seq: bigint): Promise<ServerMessage> {
    return this.request((requestId) => ({
      case: "watchStateAck",
      value: { requestId, watchId: wireId, appliedSequence: seq },
    }));
  }

  /** @internal */
  forget(w: Watch): void {
    this.watches.delete(w);
  }

  /**
   * @internal Calls again after the reconnect delay (a node without a
   * leader refuses new watches until one is back), if the connection is
   * still open then; a reconnect restarts every watch by itself.
   */
  later(again: () => void): void {
    setTimeout(() => {
      if (!this.stopped && this.state === "open") again();
    }, this.opts.reconnectDelayMs);
  }
}

function expectResult(m: ServerMessage): StateStoreResult {
  if (m.message.case !== "result") throw new StateStoreError(undefined, "message", `unexpected answer ${m.message.case}`);
  const r = m.message.value;
  if (r.result.case === "error") {
    const e = r.result.value;
    throw new StateStoreError(e.code, e.field, e.message, e.currentRevision);
  }
  return r;
}

function entryOf(r: StateStoreResult): StateEntry {
  if (r.result.case !== "entry") throw unexpected(r);
  return r.result.value;
}

function unexpected(r: StateStoreResult): StateStoreError {
  return new StateStoreError(undefined, "result", `unexpected result ${r.result.case}`);
}

let watchCounter = 0;

/**
 * One watch and its cached matching keys. The cache is only ever replaced
 * by a whole snapshot or changed by the update that is exactly next.
 */
export class Watch {
  /** The cached matching entries by key, as of the highest applied update. */
  readonly entries = new Map<string, StateEntry>();
  /** The revision of the installed snapshot. */
  snapshotRevision = 0n;
  /** The highest contiguously applied watch_sequence of the current snapshot. */
  applied = 0n;
  /** How many snapshots were installed (1 plus one per resync). */
  snapshots = 0;
  /** Where the watch stands. */
  status: WatchStatus = "pending";
  /** The last close reason the server reported, if any. */
  lastClose: { reason: StateStoreWatchCloseReason; message: string } | undefined;
  /** The refusal that ended the watch, when status is "failed". */
  error: StateStoreError | undefined;
  /** Test hook: while true, applied updates are not acknowledged. */
  pauseAcks = false;

  private readonly base: string;
  private generation = 0;
  private wireId = "";
  private acked = 0n;
  private ackInFlight = false;
  /** Set by a closure UNAVAILABLE until a snapshot is installed again. */
  private awaitingLeader = false;

  /** @internal */
  constructor(
    private readonly client: StateStoreClient,
    readonly spec: WatchSpec,
    private readonly onEvent: (w: Watch, e: WatchEvent) => void,
  ) {
    this.base = (spec.name ?? "w") + "-" + ++watchCounter;
  }

  /** @internal Registers a new wire watch and installs its snapshot. */
  start(): void {
    if (this.status === "failed" || this.status === "removed") return;
    const wireId = `${this.base}.${++this.generation}`;
    this.wireId = wireId;
    this.applied = 0n;
    this.acked = 0n;
    this.ackInFlight = false;
    this.client.watchState(this, wireId).then(
      (m) => {
        if (this.wireId !== wireId) {
          // Superseded meanwhile (a resync or a closure came first): the
          // server may still hold this watch, and it counts against the
          // session's watch limit.
          if (m.message.case === "result" && m.message.value.result.case === "watch") {
            this.client.unwatchState(wireId).catch(() => {});
          }
          return;
        }
        let r: StateStoreResult;
        try {
          r = expectResult(m);
        } catch (e) {
          const se = e as StateStoreError;
          if (this.awaitingLeader && se.code === StateStoreErrorCode.UNAVAILABLE) {
            this.wireId = "";
            this.onEvent(this, { type: "resync", why: `still unavailable: ${se.message}` });
            this.retry();
            return;
          }
          this.fail(se);
          return;
        }
        if (r.result.case !== "watch") {
          this.fail(unexpected(r));
          return;
        }
        const snap = r.result.value;
        this.awaitingLeader = false;
        this.entries.clear();
        for (const e of snap.entries) this.entries.set(e.key, e);
        this.snapshotRevision = snap.snapshotRevision;
        this.snapshots++;
        this.status = "live";
        this.onEvent(this, { type: "snapshot", revision: snap.snapshotRevision, entries: snap.entries, snapshots: this.snapshots });
      },
      (e: StateStoreError) => {
        // Only a disconnect rejects locally; the reconnect restarts us.
        if (this.wireId !== wireId || e.code === undefined) return;
        if (this.awaitingLeader && e.code === StateStoreErrorCode.UNAVAILABLE) {
          this.wireId = "";
          this.onEvent(this, { type: "resync", why: `still unavailable: ${e.message}` });
          this.retry();
          return;
        }
        this.fail(e);
      },
    );
  }

  private fail(e: StateStoreError): void {
    this.status = "failed";
    this.error = e;
    this.client.forget(this);
    this.onEvent(this, { type: "failed", error: e });
  }

  /** @internal */
  update(u: StateStoreWatchUpdate): void {
    if (this.status !== "live" || u.watchId !== this.wireId) return;
    if (u.watchSequence !== this.applied + 1n) {
      this.onEvent(this, { type: "gap", expected: this.applied + 1n, got: u.watchSequence });
      this.resync(`sequence gap: expected ${this.applied + 1n}, got ${u.watchSequence}`);
      return;
    }
    switch (u.kind) {
      case StateStoreWatchUpdateKind.PUT:
        if (!u.entry) {
          this.resync("rejected update: PUT without an entry");
          return;
        }
        this.entries.set(u.entry.key, u.entry);
        break;
      case StateStoreWatchUpdateKind.DELETE:
      case StateStoreWatchUpdateKind.EXPIRE:
        this.entries.delete(u.key);
        break;
      default:
        this.resync(`rejected update: unknown kind ${u.kind}`);
        return;
    }
    this.applied = u.watchSequence;
    this.onEvent(this, { type: "update", update: u });
    this.sendAck();
  }

  /** Acknowledges the highest applied sequence, one ack in flight at a time. */
  private sendAck(): void {
    if (this.pauseAcks || this.ackInFlight || this.applied <= this.acked) return;
    const wireId = this.wireId;
    const seq = this.applied;
    this.ackInFlight = true;
    this.client.ack(wireId, seq).then(
      (m) => {
        if (this.wireId !== wireId) return;
        this.ackInFlight = false;
        if (m.message.case === "ackResult") {
          this.acked = seq;
          this.onEvent(this, { type: "acked", sequence: seq });
          this.sendAck();
        } else {
          // A refused ack (the watch is already gone): its closure follows.
          try {
            expectResult(m);
          } catch {
            /* the closure, or the next gap, resyncs */
          }
        }
      },
      () => {
        /* disconnected: the reconnect resyncs */
      },
    );
  }

  /** Resumes acknowledging after pauseAcks (test hook). */
  resumeAcks(): void {
    this.pauseAcks = false;
    this.sendAck();
  }

  /**
   * @internal The server closed the watch: take a new snapshot, here, or
   * (moving) at the next URL once the client has moved there.
   */
  closed(reason: StateStoreWatchCloseReason, message: string, moving = false): void {
    if (this.status === "failed" || this.status === "removed") return;
    this.lastClose = { reason, message };
    this.onEvent(this, { type: "closed", reason, message });
    this.status = "resyncing";
    this.wireId = "";
    if (moving) return; // the next connection's open starts every watch
    if (reason === StateStoreWatchCloseReason.UNAVAILABLE) {
      this.awaitingLeader = true;
      this.retry();
      return;
    }
    this.start();
  }

  /** Starts again after the reconnect delay, unless superseded meanwhile. */
  private retry(): void {
    const generation = this.generation;
    this.client.later(() => {
      if (this.generation === generation && this.wireId === "" && this.status === "resyncing") this.start();
    });
  }

  /** Unwatches (when connected) and takes a new snapshot. */
  resync(why: string): void {
    if (this.status === "failed" || this.status === "removed") return;
    this.onEvent(this, { type: "resync", why });
    const old = this.wireId;
    this.status = "resyncing";
    this.wireId = "";
    if (old !== "" && this.client.connection === "open") this.client.unwatchState(old).catch(() => {});
    if (this.client.connection === "open") this.start();
  }

  /** @internal The connection dropped: the reconnect takes a new snapshot. */
  disconnected(why: string): void {
    if (this.status === "failed" || this.status === "removed") return;
    this.status = "resyncing";
    this.wireId = "";
    this.onEvent(this, { type: "resync", why });
  }

  /** Removes the watch on the server and stops following it. */
  async unwatch(): Promise<void> {
    const old = this.wireId;
    this.status = "removed";
    this.wireId = "";
    this.client.forget(this);
    if (old !== "" && this.client.connection === "open") {
      expectResult(await this.client.unwatchState(old));
    }
  }
}
