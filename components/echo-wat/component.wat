;; echo-wat: world `tool`; `run` returns ok(input) unchanged.
;; The canonical ABI by hand: the host lowers the strings into our memory through
;; `cabi_realloc`, `run` gets them flattened as (ptr, len) pairs plus the u64
;; deadline, and returns a pointer to the 12-byte result area
;; (u8 discriminant 0 = ok at +0, string ptr at +4, len at +8).
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))

  ;; Bump allocator: nothing is ever freed because every call gets a fresh instance.
  (func (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                             (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $ptr) (local.get $size)))
    (if (i32.gt_u (global.get $heap) (i32.shl (memory.size) (i32.const 16)))
      (then
        (if (i32.eq (memory.grow (i32.shr_u (i32.add (i32.sub (global.get $heap) (i32.shl (memory.size) (i32.const 16)))
                                                     (i32.const 0xffff))
                                            (i32.const 16)))
                    (i32.const -1))
          (then unreachable))))
    (memory.copy (local.get $ptr) (local.get $old) (local.get $old_size))
    (local.get $ptr))

  (func (export "run") (param $input i32) (param $input_len i32) (param $config i32) (param $config_len i32) (param $deadline i64) (result i32)
    (i32.store8 (i32.const 0) (i32.const 0))
    (i32.store (i32.const 4) (local.get $input))
    (i32.store (i32.const 8) (local.get $input_len))
    (i32.const 0))

  ;; Nothing to free: the result points into memory the instance owns until it is dropped.
  (func (export "cabi_post_run") (param i32))
)
