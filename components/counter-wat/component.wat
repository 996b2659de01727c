;; counter-wat: world `tool`; counts the calls made on this instance and returns
;; {"v":1,"count":N}. A fresh instance per invocation must therefore always answer 1.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $count (mut i32) (i32.const 0))
  ;; Output prefix at 16 (15 bytes); the digits and the closing brace follow it.
  (data (i32.const 16) "{\"v\":1,\"count\":")

  ;; Bump allocator; see echo-wat for why nothing is freed.
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

  ;; Writes the decimal digits of $n at $at and returns the address after the last digit.
  (func $utoa (param $n i64) (param $at i32) (result i32)
    (local $end i32) (local $rest i64)
    (local.set $end (local.get $at))
    (local.set $rest (local.get $n))
    (loop $count_digits
      (local.set $end (i32.add (local.get $end) (i32.const 1)))
      (local.set $rest (i64.div_u (local.get $rest) (i64.const 10)))
      (br_if $count_digits (i64.ne (local.get $rest) (i64.const 0))))
    (local.set $at (local.get $end))
    (loop $write_digits
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i64.store8 (local.get $at) (i64.add (i64.const 48) (i64.rem_u (local.get $n) (i64.const 10))))
      (local.set $n (i64.div_u (local.get $n) (i64.const 10)))
      (br_if $write_digits (i64.ne (local.get $n) (i64.const 0))))
    (local.get $end))

  (func (export "run") (param $input i32) (param $input_len i32) (param $config i32) (param $config_len i32) (param $deadline i64) (result i32)
    (local $end i32)
    (global.set $count (i32.add (global.get $count) (i32.const 1)))
    (local.set $end (call $utoa (i64.extend_i32_u (global.get $count)) (i32.const 31)))
    (i32.store8 (local.get $end) (i32.const 125)) ;; '}'
    (i32.store8 (i32.const 0) (i32.const 0))
    (i32.store (i32.const 4) (i32.const 16))
    (i32.store (i32.const 8) (i32.sub (i32.add (local.get $end) (i32.const 1)) (i32.const 16)))
    (i32.const 0))

  (func (export "cabi_post_run") (param i32))
)
