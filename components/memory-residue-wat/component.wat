;; memory-residue-wat: world `tool`; `run` answers "dirty" when its memory held any byte that is
;; not zero outside what the host has just written there (its input and configuration), else
;; "clean"; then it fills every page of its memory with 0x5a. A fresh instance, and one whose
;; memory a worker recycled, always answers "clean" (fuel/memory-import.ts).
;; The canonical ABI by hand, as in echo-wat: the result area is 12 bytes at 0 (u8 discriminant
;; 0 = ok, string ptr at +4, len at +8); the string goes at 16.
(module
  (memory (export "memory") 2)
  ;; The host's allocations start here and go up: [1024, $heap) is what the host wrote.
  (global $heap (mut i32) (i32.const 1024))

  (func (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                             (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $ptr) (local.get $size)))
    (if (i32.gt_u (global.get $heap) (i32.shl (memory.size) (i32.const 16)))
      (then unreachable))
    (memory.copy (local.get $ptr) (local.get $old) (local.get $old_size))
    (local.get $ptr))

  (func (export "run") (param $input i32) (param $input_len i32) (param $config i32) (param $config_len i32) (param $deadline i64) (result i32)
    (local $at i32)
    (local $end i32)
    (local $seen i32)
    (local.set $end (i32.shl (memory.size) (i32.const 16)))
    ;; [0, 1024): below the host's allocations
    (block $low
      (loop $scan
        (br_if $low (i32.ge_u (local.get $at) (i32.const 1024)))
        (local.set $seen (i32.or (local.get $seen) (i32.load8_u (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (br $scan)))
    ;; [$heap, end): above them
    (local.set $at (global.get $heap))
    (block $high
      (loop $scan
        (br_if $high (i32.ge_u (local.get $at) (local.get $end)))
        (local.set $seen (i32.or (local.get $seen) (i32.load8_u (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (br $scan)))
    ;; What the next instance must not see.
    (memory.fill (i32.const 0) (i32.const 0x5a) (local.get $end))
    ;; "dirty" or "clean", quotes included (a JSON string), 7 bytes little-endian
    (i64.store (i32.const 16)
      (select (i64.const 0x0022797472696422) (i64.const 0x00226e61656c6322) (local.get $seen)))
    (i32.store8 (i32.const 0) (i32.const 0))
    (i32.store (i32.const 4) (i32.const 16))
    (i32.store (i32.const 8) (i32.const 7))
    (i32.const 0))

  (func (export "cabi_post_run") (param i32))
)
