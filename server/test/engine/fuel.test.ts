import { readFile } from "node:fs/promises";
import { parse, print } from "@bytecodealliance/jco";
import { describe, expect, it } from "vitest";
import {
  CAPPED_EXPORT_PREFIX,
  capMemory,
  cappedMaximum,
  FUEL_IMPORT,
  importDefinedMemory,
  instrumentFuel,
  RECYCLED_MEMORY,
  recycledMemoryLimits,
} from "../../src/engine/fuel/index.ts";

type Fn = (...args: (number | bigint)[]) => unknown;
type Imports = Record<string, Record<string, WebAssembly.ImportValue>>;

const WAT_DIR = new URL("../fixtures/wat/", import.meta.url);
const BIG_BUDGET = 1n << 40n;

async function fixture(name: string): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(await parse(await readFile(new URL(`${name}.wat`, WAT_DIR), "utf8")));
}

function fuelGlobal(budget: bigint): WebAssembly.Global {
  return new WebAssembly.Global({ value: "i64", mutable: true }, budget);
}

function remaining(fuel: WebAssembly.Global): bigint {
  return fuel.value as bigint;
}

/** Instruments, checks validity, and instantiates with a fresh fuel global. */
async function metered(bytes: Uint8Array<ArrayBuffer>, imports: Imports = {}, budget = BIG_BUDGET) {
  const instrumented = instrumentFuel(bytes).bytes;
  expect(WebAssembly.validate(instrumented)).toBe(true);
  const fuel = fuelGlobal(budget);
  const { instance } = await WebAssembly.instantiate(instrumented, {
    ...imports,
    [FUEL_IMPORT.module]: { [FUEL_IMPORT.name]: fuel },
  });
  return { exports: instance.exports, fuel, fn: (name: string) => instance.exports[name] as Fn };
}

async function plain(bytes: Uint8Array<ArrayBuffer>, imports: Imports = {}) {
  const { instance } = await WebAssembly.instantiate(bytes, imports);
  return { exports: instance.exports, fn: (name: string) => instance.exports[name] as Fn };
}

/** Fuel consumed by one call. */
function spent(fuel: WebAssembly.Global, call: () => unknown): bigint {
  const before = remaining(fuel);
  call();
  return before - remaining(fuel);
}

/** Runs `call` expecting a fuel trap: an `unreachable` trap with the global left negative. */
function expectFuelTrap(fuel: WebAssembly.Global, call: () => unknown): void {
  let trap: unknown;
  try {
    call();
  } catch (error) {
    trap = error;
  }
  expect(trap).toBeInstanceOf(WebAssembly.RuntimeError);
  expect(String(trap)).toMatch(/unreachable/);
  expect(remaining(fuel)).toBeLessThan(0n);
}

/** Hand-counted cost of fib_rec(n): 4 for the test, 1 for the base case or 9 plus two calls. */
function fibRecCost(n: number): bigint {
  return n < 2 ? 5n : 13n + fibRecCost(n - 1) + fibRecCost(n - 2);
}

describe("fuel metering of compute code (fib.wat, no imports)", () => {
  it("leaves results unchanged", async () => {
    const bytes = await fixture("fib");
    const m = await metered(bytes);
    const p = await plain(bytes);
    for (let n = 0; n <= 20; n++) {
      expect(m.fn("fib_rec")(n)).toBe(p.fn("fib_rec")(n));
      expect(m.fn("fib_iter")(n * 4)).toBe(p.fn("fib_iter")(n * 4));
      expect(m.fn("churn")(n + 1)).toBe(p.fn("churn")(n + 1));
    }
    expect(m.fn("add")(2, 40)).toBe(42);
  });

  it("charges a loop-free function its operator count (end costs nothing)", async () => {
    const m = await metered(await fixture("fib"));
    expect(spent(m.fuel, () => m.fn("add")(1, 2))).toBe(3n);
  });

  it("charges a loop per iteration, exactly and linearly", async () => {
    const m = await metered(await fixture("fib"));
    // 2 before the loop, 16 per pass (including the final pass that exits), 1 after.
    for (const n of [0, 1, 10, 90]) expect(spent(m.fuel, () => m.fn("fib_iter")(n))).toBe(16n * BigInt(n) + 19n);
  });

  it("charges every recursive call and is deterministic across runs and instances", async () => {
    const bytes = await fixture("fib");
    const a = await metered(bytes);
    const b = await metered(bytes);
    const first = spent(a.fuel, () => a.fn("fib_rec")(20));
    expect(first).toBe(fibRecCost(20));
    expect(spent(a.fuel, () => a.fn("fib_rec")(20))).toBe(first);
    expect(spent(b.fuel, () => b.fn("fib_rec")(20))).toBe(first);
    expect(spent(a.fuel, () => a.fn("fib_rec")(21))).toBeGreaterThan(first);
  });

  it("succeeds on exactly enough fuel and traps well short of it", async () => {
    const bytes = await fixture("fib");
    const exact = await metered(bytes, {}, fibRecCost(15));
    expect(exact.fn("fib_rec")(15)).toBe(610);
    expect(remaining(exact.fuel)).toBe(0n);
    const short = await metered(bytes, {}, fibRecCost(15) / 2n);
    expectFuelTrap(short.fuel, () => short.fn("fib_rec")(15));
  });

  it("reports how many functions it instrumented", async () => {
    expect(instrumentFuel(await fixture("fib")).functionsInstrumented).toBe(4);
  });
});

describe("how the counter crosses calls (calls.wat, tail-indirect.wat)", () => {
  it("meters the start function at instantiation", async () => {
    const m = await metered(await fixture("calls"), {}, 1_000n);
    expect((m.exports.started as WebAssembly.Global).value).toBe(1);
    expect(remaining(m.fuel)).toBe(998n);
  });

  it("meters functions reached through a table, per call", async () => {
    const m = await metered(await fixture("calls"));
    expect(m.fn("via_table")(10)).toBe(165);
    // 14 in the loop, 3 in $triple.
    expect(spent(m.fuel, () => m.fn("via_table")(11)) - spent(m.fuel, () => m.fn("via_table")(10))).toBe(17n);
    const short = await metered(await fixture("calls"), {}, 1_000n);
    expectFuelTrap(short.fuel, () => short.fn("via_table")(1_000));
  });

  it("keeps several results and branches to the function's own label intact", async () => {
    const m = await metered(await fixture("calls"));
    expect(m.fn("pair_sum")(4)).toBe(9);
    expect([m.fn("early")(1), m.fn("early")(0), m.fn("early")(2)]).toEqual([7, 8, 9]);
  });

  it("passes the counter as a parameter, and through the global in a module whose tail call cannot pass it", async () => {
    const passing = await print(instrumentFuel(await fixture("fib")).bytes);
    expect(passing).toMatch(/\(param i32 i64\) \(result i32 i64\)/);
    const bytes = await fixture("tail-indirect");
    expect(await print(instrumentFuel(bytes).bytes)).not.toMatch(/i64\) \(result i32 i64\)/);
    const m = await metered(bytes);
    expect(m.fn("halve")(10)).toBe(5);
    // Both conventions charge the same.
    expect(spent(m.fuel, () => m.fn("fib_rec")(20))).toBe(fibRecCost(20));
  });
});

describe("fuel exhaustion", () => {
  it("stops an infinite loop with an unreachable trap and a negative global", async () => {
    const m = await metered(await fixture("spin"), {}, 10_000n);
    expectFuelTrap(m.fuel, () => m.fn("spin")());
  });

  it("stops an infinite loop that calls a function each pass", async () => {
    const m = await metered(await fixture("spin"), {}, 10_000n);
    expectFuelTrap(m.fuel, () => m.fn("spin_calls")());
  });

  it("stops unbounded recursion before the stack overflows", async () => {
    const m = await metered(await fixture("spin"), {}, 1_000n);
    expectFuelTrap(m.fuel, () => m.fn("recurse_forever")(0));
  });

  it("leaves a non-fuel trap distinguishable: the global stays non-negative", async () => {
    const bytes = await parse(`(module (func (export "boom") (result i32) (i32.div_u (i32.const 1) (i32.const 0))))`);
    const m = await metered(new Uint8Array(bytes), {}, 1_000n);
    expect(() => m.fn("boom")()).toThrow(/divide by zero/);
    expect(remaining(m.fuel)).toBeGreaterThanOrEqual(0n);
  });
});

describe("structured control flow with multi-value (control.wat)", () => {
  it("computes the same results as the original", async () => {
    const bytes = await fixture("control");
    const m = await metered(bytes);
    const p = await plain(bytes);
    for (let x = 0; x < 5; x++) expect(m.fn("classify")(x)).toBe(p.fn("classify")(x));
    for (let n = 1; n < 30; n++) {
      expect(m.fn("sum_to")(n)).toBe(p.fn("sum_to")(n));
      expect(m.fn("collatz_steps")(n)).toBe(p.fn("collatz_steps")(n));
    }
    expect(m.fn("minmax")(9, 4)).toEqual([4, 9]);
    expect(m.fn("spread")(3, 10)).toBe(p.fn("spread")(3, 10));
    expect(m.fn("spread")(5, 5)).toBe(p.fn("spread")(5, 5));
    expect(m.fn("sum_to")(100)).toBe(5050);
    expect(m.fn("collatz_steps")(27)).toBe(111);
  });

  it("charges each br_table arm for what it executes", async () => {
    const m = await metered(await fixture("control"));
    // local.get + br_table, then the arm: i32.const + return (return is free like end), or i32.const.
    expect(spent(m.fuel, () => m.fn("classify")(0))).toBe(3n);
    expect(spent(m.fuel, () => m.fn("classify")(2))).toBe(3n);
    expect(spent(m.fuel, () => m.fn("classify")(7))).toBe(3n);
  });
});

describe("global renumbering (globals.wat)", () => {
  const env = () => ({ env: { base: 64, slot: 1 } });

  it("keeps code, initialisers, offsets and exports pointing at the same globals", async () => {
    const m = await metered(await fixture("globals"), env());
    const answer = m.exports.answer as WebAssembly.Global;
    const wide = m.exports.wide as WebAssembly.Global;
    expect(answer.value).toBe(42);
    expect(wide.value).toBe(7n);
    m.fn("bump_wide")();
    expect(wide.value).toBe(8n);
    expect([m.fn("inc")(), m.fn("inc")()]).toEqual([1, 2]);
    expect(m.fn("shifted")()).toBe(72);
    expect(m.fn("copy")()).toBe(32);
    expect(m.fn("call_slot")(1)).toBe(1);
    expect(m.fn("call_slot")(32)).toBe(2);
    expect([m.fn("call_slot")(6), m.fn("call_slot")(7)]).toEqual([2, 1]);
    expect([m.fn("call_init")(0), m.fn("call_init")(1)]).toEqual([2, 2]);
    const memory = new Uint8Array((m.exports.mem as WebAssembly.Memory).buffer);
    const text = (at: number, length: number) => new TextDecoder().decode(memory.subarray(at, at + length));
    expect(text(64, 8)).toBe("imported");
    expect(text(32, 7)).toBe("defined");
  });

  it("appends the fuel import after the imported globals and renames defined globals in the name section", async () => {
    const wat = await print(instrumentFuel(await fixture("globals")).bytes);
    expect(wat).toContain(`(import "env" "slot" (global $slot (;1;) i32))`);
    expect(wat).toContain(`(import "${FUEL_IMPORT.module}" "${FUEL_IMPORT.name}" (global (;2;) (mut i64)))`);
    expect(wat).toContain("(global $counter (;3;) (mut i32)");
    expect(wat).toContain("(global $copy (;8;) i32 global.get $data_at)");
  });
});

describe("calls into host imports (host.wat)", () => {
  it("publishes the counter before the call and adopts the host's value after it", async () => {
    let seen = -1n;
    const imports = {
      host: {
        observe: () => {
          seen = remaining(m.fuel);
          m.fuel.value = 5_000n;
        },
        tick: () => 0,
      },
    };
    const m = await metered(await fixture("host"), imports, 1_000_000n);
    m.fn("observe_once")();
    expect(seen).toBe(1_000_000n - 1n); // the call itself; nop and end are free
    expect(remaining(m.fuel)).toBe(5_000n);
  });

  it("lets the host refill fuel mid-run", async () => {
    let calls = 0;
    const imports = {
      host: {
        observe: () => undefined,
        tick: () => {
          m.fuel.value = remaining(m.fuel) + 100n;
          return ++calls < 200 ? 1 : 0;
        },
      },
    };
    const m = await metered(await fixture("host"), imports, 100n);
    expect(m.fn("until_host_stops")()).toBe(200);
  });

  it("traps at the next loop head when the host exhausts the fuel", async () => {
    const imports = {
      host: {
        observe: () => undefined,
        tick: () => {
          m.fuel.value = -1n;
          return 1;
        },
      },
    };
    const m = await metered(await fixture("host"), imports, 1_000_000n);
    expectFuelTrap(m.fuel, () => m.fn("until_host_stops")());
  });
});

describe("exception handling (exceptions.wat)", () => {
  // The thrower's loop costs 5 per pass: local.get, i32.const, i32.sub, local.tee, br_if.
  const PASS = 5n;

  it("keeps fuel burnt by a callee that throws into a try_table", async () => {
    const m = await metered(await fixture("exceptions"));
    expect(m.fn("catch_block")(3, 10)).toBe(21);
    const short = spent(m.fuel, () => m.fn("catch_block")(1, 50));
    const long = spent(m.fuel, () => m.fn("catch_block")(1, 150));
    expect(long - short).toBe(100n * PASS);
    const twice = spent(m.fuel, () => m.fn("catch_block")(2, 50));
    const thrice = spent(m.fuel, () => m.fn("catch_block")(3, 50));
    expect(thrice - twice).toBe(twice - short);
  });

  it("publishes fuel on every path into a catch target: an earlier branch to it", async () => {
    const m = await metered(await fixture("exceptions"));
    expect(m.fn("catch_block")(4, 0)).toBe(4000);
    // Per pass: 15 up to the untaken try_table (charged with its segment), 3 after the handler block.
    const once = spent(m.fuel, () => m.fn("catch_block")(1, 0));
    expect(spent(m.fuel, () => m.fn("catch_block")(2, 0)) - once).toBe(18n);
  });

  it("publishes fuel on every path into a catch target: an if without else", async () => {
    const m = await metered(await fixture("exceptions"));
    // local.get + if, then i32.const after the if.
    expect(spent(m.fuel, () => m.fn("catch_after_if")(0, 0))).toBe(3n);
    // ... plus try_table, local.get, call, and the thrower: 5 per pass and i32.const + throw.
    expect(spent(m.fuel, () => m.fn("catch_after_if")(1, 10))).toBe(3n + 3n + 10n * PASS + 2n);
  });

  it("keeps fuel burnt by a callee that throws into a catch clause on the function's own label", async () => {
    const m = await metered(await fixture("exceptions"));
    const short = spent(m.fuel, () => m.fn("catch_to_return")(50));
    const long = spent(m.fuel, () => m.fn("catch_to_return")(150));
    expect(long - short).toBe(100n * PASS);
  });

  it("stops a loop re-entered through a catch clause", async () => {
    const m = await metered(await fixture("exceptions"), {}, 100_000n);
    expectFuelTrap(m.fuel, () => m.fn("catch_loop_forever")());
  });

  it("keeps fuel burnt by a callee that throws into a legacy catch, and handles delegate", async () => {
    const m = await metered(await fixture("exceptions"));
    expect(m.fn("legacy_catch")(3, 10)).toBe(21);
    const short = spent(m.fuel, () => m.fn("legacy_catch")(1, 50));
    const long = spent(m.fuel, () => m.fn("legacy_catch")(1, 150));
    expect(long - short).toBe(100n * PASS);
    expect(m.fn("legacy_delegate")()).toBe(7);
  });
});

describe("post-MVP opcodes (features.wat)", () => {
  it("decodes SIMD, bulk memory, reference types, tail calls, saturating and sign-extension ops", async () => {
    const bytes = await fixture("features");
    const m = await metered(bytes);
    const p = await plain(bytes);
    expect(m.fn("simd")()).toBe(p.fn("simd")());
    expect(m.fn("bulk")()).toBe(9);
    expect(m.fn("refs")(21)).toBe(p.fn("refs")(21));
    expect(m.fn("tail")(100_000)).toBe(p.fn("tail")(100_000));
    expect(m.fn("numeric")(3.9)).toBe(2);
  });

  it("meters tail-call loops (a return_call cycle has no loop head, only entry checks)", async () => {
    const m = await metered(await fixture("features"), {}, 10_000n);
    expectFuelTrap(m.fuel, () => m.fn("tail")(1_000_000));
  });
});

describe("bulk operators are charged by their size", () => {
  /** Bulk operators on a size operand; a tail call through a table makes a module take the global-counter convention. */
  const bulkModule = (viaGlobal: boolean) =>
    parse(`(module
      (type $v (func))
      (memory (export "mem") 1)
      (table $t 0 funcref)
      (func (export "fill") (param i32) (param $keep i64) (result i64) (local $also f32)
        (memory.fill (i32.const 0) (i32.const 7) (local.get 0))
        (local.get $keep))
      (func (export "copy") (param i32) (memory.copy (i32.const 0) (i32.const 8) (local.get 0)))
      (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
      (func (export "table_grow") (param i32) (result i32) (table.grow $t (ref.null func) (local.get 0)))
      (func (export "table_fill") (param i32) (table.fill $t (i32.const 0) (ref.null func) (local.get 0)))
      ${viaGlobal ? `(func (return_call_indirect $t (type $v) (i32.const 0)))` : ""})`).then((bytes) => new Uint8Array(bytes));
  /** The extra fuel a call with size `n` costs over the same call with size 0. */
  const extra = (m: Awaited<ReturnType<typeof metered>>, name: string, n: number, ...rest: bigint[]) =>
    spent(m.fuel, () => m.fn(name)(n, ...rest)) - spent(m.fuel, () => m.fn(name)(0, ...rest));

  for (const viaGlobal of [false, true]) {
    it(`charges one unit per 8 bytes, a table entry counting 32 bytes (counter ${viaGlobal ? "through the global" : "passed in calls"})`, async () => {
      const m = await metered(await bulkModule(viaGlobal));
      expect(m.fn("fill")(100, 5n)).toBe(5n); // locals around the scratch local keep their values
      expect(new Uint8Array((m.exports.mem as WebAssembly.Memory).buffer, 0, 101)).toEqual(Uint8Array.from({ length: 101 }, (_, i) => (i < 100 ? 7 : 0)));
      expect(extra(m, "fill", 8000, 5n)).toBe(1000n);
      expect(extra(m, "copy", 4096)).toBe(512n);
      expect(extra(m, "grow", 2)).toBe(2n * 8192n);
      expect(extra(m, "table_grow", 10)).toBe(40n);
      expect(extra(m, "table_fill", 5)).toBe(20n);
      // A failed grow is charged all the same: the charge depends on the operand only.
      expect(m.fn("grow")(70_000)).toBe(-1);
    });
  }

  it("traps before the work when the fuel does not cover it", async () => {
    const m = await metered(await bulkModule(false), {}, 1_000n);
    expectFuelTrap(m.fuel, () => m.fn("fill")(65536, 0n));
    expect(new Uint8Array((m.exports.mem as WebAssembly.Memory).buffer, 0, 4)).toEqual(new Uint8Array(4));
    const grower = await metered(await bulkModule(false), {}, 10_000n);
    expectFuelTrap(grower.fuel, () => grower.fn("table_grow")(1_000_000));
  });

  it("refuses 64-bit memories and tables, whose sizes are not i32", async () => {
    const bytes = new Uint8Array(await parse(`(module (memory i64 1))`));
    expect(() => instrumentFuel(bytes)).toThrow(/64-bit memories and tables are not supported/);
  });
});

describe("capMemory", () => {
  const PAGE = 65536;
  const sharedMemory = (maximum?: number) => new WebAssembly.Memory(maximum === undefined ? { initial: 1 } : { initial: 1, maximum });

  it("caps a memory without maximum: memory.grow past the cap returns -1", async () => {
    const capped = capMemory(await fixture("memory"), 4);
    expect(WebAssembly.validate(capped)).toBe(true);
    const { instance } = await WebAssembly.instantiate(capped, { env: { shared: sharedMemory(4) } });
    const grow = instance.exports.grow as Fn;
    expect(grow(2)).toBe(1);
    expect(grow(2)).toBe(-1);
    expect(grow(1)).toBe(3);
    expect(grow(1)).toBe(-1);
    expect((instance.exports.mem as WebAssembly.Memory).buffer.byteLength).toBe(4 * PAGE);
  });

  it("caps imported memories: the host must supply a memory no larger than the cap", async () => {
    const capped = capMemory(await fixture("memory"), 4);
    await expect(WebAssembly.instantiate(capped, { env: { shared: sharedMemory() } })).rejects.toThrow(WebAssembly.LinkError);
    await expect(WebAssembly.instantiate(capped, { env: { shared: sharedMemory(8) } })).rejects.toThrow(WebAssembly.LinkError);
    const { instance } = await WebAssembly.instantiate(capped, { env: { shared: sharedMemory(2) } });
    expect((instance.exports.grow_imported as Fn)(1)).toBe(1);
    expect((instance.exports.grow_imported as Fn)(1)).toBe(-1);
  });

  it("keeps a smaller declared maximum", async () => {
    const bytes = new Uint8Array(await parse(`(module (memory 1 2) (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))`));
    const { instance } = await WebAssembly.instantiate(capMemory(bytes, 100));
    expect((instance.exports.grow as Fn)(1)).toBe(1);
    expect((instance.exports.grow as Fn)(1)).toBe(-1);
  });

  it("rejects a module whose minimum exceeds the cap, and a bad cap", async () => {
    const bytes = new Uint8Array(await parse(`(module (memory 8))`));
    expect(() => capMemory(bytes, 4)).toThrow("the module's minimum sizes exceed the memory cap of 4 pages (256 KiB): memories 8 pages (512 KiB)");
    expect(() => capMemory(bytes, 1.5)).toThrow(RangeError);
  });

  it("composes with fuel instrumentation in either order", async () => {
    for (const bytes of [await fixture("memory"), await tables()]) {
      const both = [capMemory(instrumentFuel(bytes).bytes, 64), instrumentFuel(capMemory(bytes, 64)).bytes];
      expect(both[0]).toEqual(both[1]);
      expect(WebAssembly.validate(both[0]!)).toBe(true);
      expect(() => new WebAssembly.Module(both[0]!)).not.toThrow();
    }
  });

  /** Capped exports by name: the maximum each carries, from a compiled module's export list. */
  const cappedExports = (module: Uint8Array<ArrayBuffer>) =>
    Object.fromEntries(
      WebAssembly.Module.exports(new WebAssembly.Module(module)).flatMap(({ name }) =>
        name.startsWith(CAPPED_EXPORT_PREFIX) ? [[name, cappedMaximum(name)]] : [],
      ),
    );

  /** A memory and three tables, one with a declared maximum and one with an initialiser; grow(i, n) grows table i. */
  const tables = () =>
    parse(`(module
      (memory (export "mem") 1)
      (table $a 1 funcref)
      (table $b 0 externref)
      (table $c 0 10 funcref (ref.null func))
      (func (export "grow") (param i32 i32) (result i32)
        (block $b (block $a (br_table $a $b (local.get 0)))
          (return (table.grow $a (ref.null func) (local.get 1))))
        (if (i32.eq (local.get 0) (i32.const 1)) (then (return (table.grow $b (ref.null extern) (local.get 1)))))
        (table.grow $c (ref.null func) (local.get 1))))`).then((bytes) => new Uint8Array(bytes));

  it("caps tables: together they may grow by a sixty-fourth of the cap, each past its maximum returns -1", async () => {
    // 64 pages = 4 MiB: tables may grow by 64 KiB, 2048 entries of 32 bytes: 10 to the table
    // declaring that maximum, the rest split evenly.
    const capped = capMemory(await tables(), 64);
    expect(WebAssembly.validate(capped)).toBe(true);
    const { instance } = await WebAssembly.instantiate(capped);
    const grow = instance.exports.grow as Fn;
    expect([grow(0, 2000), grow(1, 2000), grow(2, 2000)]).toEqual([-1, -1, -1]);
    expect([grow(0, 1019), grow(1, 1019), grow(2, 10)]).toEqual([1, 0, 0]);
    expect([grow(0, 1), grow(1, 1), grow(2, 1)]).toEqual([-1, -1, -1]);
    // The memory gets the rest in whole pages: 4 MiB - (1020 + 1019 + 10) * 32 bytes is 62.99 pages.
    expect((instance.exports.mem as WebAssembly.Memory).grow(61)).toBe(1);
    expect(() => (instance.exports.mem as WebAssembly.Memory).grow(1)).toThrow(RangeError);
    // Only what the cap limited is exported for the host to watch; the table that kept its own maximum is not.
    expect(cappedExports(capped)).toEqual({ "skillenv:capped/memory0/62": 62, "skillenv:capped/table0/1020": 1020, "skillenv:capped/table1/1019": 1019 });
  });

  it("keeps memories and tables of one module within the cap together, minimums first", async () => {
    const cases: [string, number, Record<string, number>][] = [
      // A memory the size of the cap leaves growable tables no room.
      [`(memory 64) (table 0 funcref)`, 64, { "skillenv:capped/memory0/64": 64, "skillenv:capped/table0/0": 0 }],
      // Tables never take room the memories' minimums need.
      [`(memory 63) (table 0 funcref)`, 64, { "skillenv:capped/memory0/63": 63, "skillenv:capped/table0/2048": 2048 }],
      // A fixed table (jco's shims, StarlingMonkey's) costs the memory only its own size.
      [`(memory 1) (table 2047 2047 funcref)`, 64, { "skillenv:capped/memory0/63": 63 }],
      // Two memories share the room the tables leave.
      [`(memory 1) (memory 1 2)`, 64, { "skillenv:capped/memory0/62": 62 }],
    ];
    for (const [fields, pages, exported] of cases) {
      const capped = capMemory(new Uint8Array(await parse(`(module ${fields})`)), pages);
      expect(cappedExports(capped), fields).toEqual(exported);
    }
    const refused = new Uint8Array(await parse(`(module (memory 64) (table 1 funcref))`));
    expect(() => capMemory(refused, 64)).toThrow(
      "the module's minimum sizes exceed the memory cap of 64 pages (4 MiB): memories 64 pages (4 MiB), tables 1 entries (0.03 KiB at 32 bytes an entry)",
    );
    const hugeTable = new Uint8Array(await parse(`(module (table 200000 funcref))`));
    expect(() => capMemory(hugeTable, 64)).toThrow(/tables 200000 entries \(6.1 MiB at 32 bytes an entry\)/);
  });

  it("caps imported tables at the whole cap: the host must supply a table within it", async () => {
    const bytes = new Uint8Array(
      await parse(`(module (import "env" "t" (table 1 funcref)) (func (export "grow") (param i32) (result i32) (table.grow 0 (ref.null func) (local.get 0))))`),
    );
    const capped = capMemory(bytes, 64); // 4 MiB: 131072 entries of 32 bytes
    const table = (maximum?: number) => ({
      env: { t: new WebAssembly.Table({ element: "anyfunc", initial: 1, ...(maximum === undefined ? {} : { maximum }) }) },
    });
    await expect(WebAssembly.instantiate(capped, table())).rejects.toThrow(WebAssembly.LinkError);
    await expect(WebAssembly.instantiate(capped, table(131073))).rejects.toThrow(WebAssembly.LinkError);
    const { instance } = await WebAssembly.instantiate(capped, table(131072));
    expect((instance.exports.grow as Fn)(131071)).toBe(1);
    expect(cappedExports(capped)).toEqual({}); // the exporter of a table watches it
    const tooBig = new Uint8Array(await parse(`(module (import "env" "t" (table 131073 funcref)))`));
    expect(() => capMemory(tooBig, 64)).toThrow("imported table minimum 131073 entries exceeds the cap of 131072 entries");
  });

  it("refuses a module exporting a name the service reserves", async () => {
    const bytes = new Uint8Array(await parse(`(module (memory (export "skillenv:capped/memory0/1") 1))`));
    expect(() => capMemory(bytes, 64)).toThrow("the module exports skillenv:capped/memory0/1, a name the service reserves");
  });
});

describe("importDefinedMemory (a memory the worker recycles)", () => {
  const PAGE = 65536;
  /** A module with imports before its memory, a data segment, an exported memory and a reader of it. */
  const source = `(module
    (import "env" "f" (func $f (result i32)))
    (memory (export "memory") 2)
    (data (i32.const 8) "segment")
    (func (export "load") (param i32) (result i32) (i32.load8_u (local.get 0)))
    (func (export "size") (result i32) (memory.size))
    (func (export "call") (result i32) (call $f)))`;

  it("imports the memory with its capped limits; data segments, exports and functions work as before", async () => {
    const capped = capMemory(new Uint8Array(await parse(source)), 64);
    const rewritten = importDefinedMemory(capped, 16)!;
    const limits = recycledMemoryLimits(rewritten)!;
    expect(limits).toEqual({ initial: 2, maximum: 64 });
    const module = new WebAssembly.Module(rewritten);
    expect(WebAssembly.Module.imports(module)).toEqual([
      { module: "env", name: "f", kind: "function" },
      { module: RECYCLED_MEMORY.module, name: RECYCLED_MEMORY.name, kind: "memory" },
    ]);
    // A used memory, zeroed: the segment is written into it again at instantiation.
    const memory = new WebAssembly.Memory(limits);
    new Uint8Array(memory.buffer).fill(0x5a).fill(0);
    const instance = new WebAssembly.Instance(module, { env: { f: () => 7 }, [RECYCLED_MEMORY.module]: { [RECYCLED_MEMORY.name]: memory } });
    expect(instance.exports.memory).toBe(memory);
    const load = instance.exports.load as Fn;
    expect(String.fromCharCode(...Array.from({ length: 7 }, (_, i) => load(8 + i) as number))).toBe("segment");
    expect(load(7)).toBe(0);
    expect((instance.exports.size as Fn)()).toBe(2);
    expect((instance.exports.call as Fn)()).toBe(7);
    // The limits are the module's: a memory of other limits does not link.
    expect(
      () =>
        new WebAssembly.Instance(module, { env: { f: () => 7 }, [RECYCLED_MEMORY.module]: { [RECYCLED_MEMORY.name]: new WebAssembly.Memory({ initial: 2 }) } }),
    ).toThrow(WebAssembly.LinkError);
    expect(memory.buffer.byteLength).toBe(2 * PAGE);
  });

  it("adds an import section to a module without one, in its place", async () => {
    const rewritten = importDefinedMemory(capMemory(new Uint8Array(await parse(`(module (type (func)) (memory 1) (func (type 0)))`)), 4), 16)!;
    expect(WebAssembly.validate(rewritten)).toBe(true);
    expect(WebAssembly.Module.imports(new WebAssembly.Module(rewritten))).toEqual([
      { module: RECYCLED_MEMORY.module, name: RECYCLED_MEMORY.name, kind: "memory" },
    ]);
  });

  it("leaves alone a module where recycling would not be exact: large, shared, imported, two or no memories", async () => {
    const modules = [
      `(module (memory 17 64))`,
      `(module (memory 1 4 shared))`,
      `(module (import "env" "m" (memory 1 4)))`,
      `(module (import "env" "m" (memory 1 4)) (memory 1 4))`,
      `(module (memory 1 4) (memory 1 4))`,
      `(module (func))`,
    ];
    for (const text of modules) expect(importDefinedMemory(new Uint8Array(await parse(text)), 16), text).toBeUndefined();
    // No maximum: capMemory gives it one first, as preparation does.
    expect(importDefinedMemory(new Uint8Array(await parse(`(module (memory 1))`)), 16)).toBeUndefined();
    expect(recycledMemoryLimits(importDefinedMemory(capMemory(new Uint8Array(await parse(`(module (memory 1))`)), 8), 16)!)).toEqual({
      initial: 1,
      maximum: 8,
    });
  });
});
