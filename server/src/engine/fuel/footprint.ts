/**
 * How the memories and tables one core module defines share the memory cap
 * (SERVICE_ENV_MEMORY_MIB): the maxima capMemory (memory.ts) writes into the module. Invariant:
 * the sum of their maxima, in bytes, never exceeds the cap, so no instance of the module can hold
 * more than the cap in memories and tables together, however it grows them.
 *
 * - The minimums come first: memories and tables must start within the cap, else the module is
 *   refused (it could not even be instantiated).
 * - Tables may grow, together, by a sixty-fourth of the cap beyond their minimums (4 MiB, 131 072
 *   entries, at 256 MiB: seventeen times the 7 687 entries of StarlingMonkey's fixed table), and
 *   no further than the memories' minimums leave room for.
 * - Memories get the rest: the cap minus the tables' maxima, in whole pages. A module without
 *   growable tables loses nothing; one with a growable table at most a sixty-fourth.
 *
 * Within each kind the room above the minimums is split evenly, and what one memory or table
 * cannot take (its own declared maximum is lower) goes to the others.
 */
import { PAGE_BYTES } from "../wasm/index.ts";

/** The unit fuel is charged in for bulk operators (opcodes.ts): a machine word. */
export const WORD_BYTES = 8;
/**
 * What V8 holds per table entry: an 8-byte pointer in the table's entry array, plus, for a
 * funcref table, a 24-byte entry of its dispatch table (what call_indirect reads: target,
 * signature, instance). Measured on Node 24: 32 bytes of heap per funcref entry, 8 per externref
 * entry. One figure for every table, the larger: the cap must hold for the worst case.
 */
export const TABLE_ENTRY_BYTES = 32;
/** The tables' growth room beyond their minimums, as a fraction of the cap. */
export const TABLE_GROWTH_SHARE = 1 / 64;

/** A memory's limits in pages, a table's in entries; `max` undefined when it declares none. */
export interface Limits {
  min: number;
  max: number | undefined;
}

/** The maxima, in the order given: memories in pages, tables in entries. */
export interface Maxima {
  memories: number[];
  tables: number[];
}

/** The maxima of a module's defined memories and tables within `capBytes`; throws when their minimums do not fit. */
export function planMaxima(memories: readonly Limits[], tables: readonly Limits[], capBytes: number): Maxima {
  const memoryPages = sumOf(memories.map((memory) => memory.min));
  const tableEntries = sumOf(tables.map((table) => table.min));
  const left = capBytes - memoryPages * PAGE_BYTES - tableEntries * TABLE_ENTRY_BYTES;
  if (left < 0) {
    const parts = [`memories ${memoryPages} pages (${size(memoryPages * PAGE_BYTES)})`];
    if (tables.length > 0) parts.push(`tables ${tableEntries} entries (${size(tableEntries * TABLE_ENTRY_BYTES)} at ${TABLE_ENTRY_BYTES} bytes an entry)`);
    throw new Error(`the module's minimum sizes exceed the memory cap of ${capBytes / PAGE_BYTES} pages (${size(capBytes)}): ${parts.join(", ")}`);
  }
  const tableRoom = Math.floor(Math.min(capBytes * TABLE_GROWTH_SHARE, left) / TABLE_ENTRY_BYTES);
  const tableMaxima = spread(tables, tableRoom);
  const memoryRoom = Math.floor((capBytes - sumOf(tableMaxima) * TABLE_ENTRY_BYTES) / PAGE_BYTES) - memoryPages;
  return { memories: spread(memories, memoryRoom), tables: tableMaxima };
}

/**
 * Each gets its minimum plus an even share of `room`, never past its own declared maximum. The
 * ones with the least headroom are served first, so what they cannot take passes to the rest.
 */
function spread(objects: readonly Limits[], room: number): number[] {
  const headroom = objects.map((object) => (object.max ?? Infinity) - object.min);
  const order = objects.map((_, index) => index).sort((a, b) => headroom[a]! - headroom[b]!);
  const maxima = objects.map((object) => object.min);
  let left = room;
  order.forEach((index, served) => {
    const grant = Math.min(Math.floor(left / (order.length - served)), headroom[index]!);
    maxima[index]! += grant;
    left -= grant;
  });
  return maxima;
}

function sumOf(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

function size(bytes: number): string {
  return bytes >= 1 << 20 ? `${+(bytes / (1 << 20)).toFixed(2)} MiB` : `${+(bytes / 1024).toFixed(2)} KiB`;
}
