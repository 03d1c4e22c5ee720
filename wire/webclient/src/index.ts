// The public surface of the browser client bundle (dist/keeppeek.mjs).
export {
  StateStoreClient,
  StateStoreError,
  Watch,
  closeReasonName,
  errorCodeName,
  updateKindName,
  StateStoreErrorCode,
  StateStoreWatchCloseReason,
  StateStoreWatchUpdateKind,
} from "./client.js";
export type {
  ClientOptions,
  ConnectionState,
  DeleteRequest,
  PutRequest,
  StateEntry,
  StateStoreWatchUpdate,
  WatchEvent,
  WatchSpec,
} from "./client.js";
