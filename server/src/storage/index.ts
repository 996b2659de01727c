export { openStore, workspaceKey, workspaceRange } from "./database.ts";
export { SHA256_HEX, type BlobStore, type ExpectedContent, type Sha256Hex } from "./blob-store.ts";
export { FileBlobStore } from "./file-blob-store.ts";
export { KeyedLock } from "./keyed-lock.ts";
export { readOrCreateKey } from "./data-key.ts";
export { storageErrorInterceptor } from "./api-errors.ts";
export { LevelStore } from "./level-store.ts";
export { prefixEnd, StorageError, type KeyRange, type Store, type Table, type TablePage, type WriteOp } from "./store.ts";
export { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, readPage, type Listing, type Page, type PageRequest } from "./pages.ts";
