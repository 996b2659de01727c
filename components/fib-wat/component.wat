;; fib-wat: world `tool`; reads n from the first run of decimal digits in the
;; input (`25`, `"25"` and `{"n":25}` all give 25, but `{"v":1,"n":25}` gives 1),
;; computes fib(n) with the naive recursion (a deterministic, tunable amount of
;; work for fuel tests and benchmarks) and returns {"v":1,"fib":N}. An input
;; without any digit is err({code:"invalid_input"}).
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 32) "{\"v\":1,\"fib\":")                   ;; 13 bytes, digits from 45
  (data (i32.const 80) "invalid_input")                         ;; 13 bytes
  (data (i32.const 96) "input must contain a decimal number") ;; 35 bytes

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

  (func $fib (param $n i32) (result i64)
    (if (result i64) (i32.lt_u (local.get $n) (i32.const 2))
      (then (i64.extend_i32_u (local.get $n)))
      (else (i64.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))

  (func $is_digit (param $byte i32) (result i32)
    (i32.lt_u (i32.sub (local.get $byte) (i32.const 48)) (i32.const 10)))

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
    (local $at i32) (local $end_input i32) (local $n i32) (local $end i32)
    (local.set $at (local.get $input))
    (local.set $end_input (i32.add (local.get $input) (local.get $input_len)))
    ;; Skip to the first digit.
    (block $found
      (loop $skip
        (br_if $found (i32.ge_u (local.get $at) (local.get $end_input)))
        (br_if $found (call $is_digit (i32.load8_u (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (br $skip)))
    (if (i32.ge_u (local.get $at) (local.get $end_input))
      (then
        (i32.store8 (i32.const 0) (i32.const 1))
        (i32.store (i32.const 4) (i32.const 80))
        (i32.store (i32.const 8) (i32.const 13))
        (i32.store (i32.const 12) (i32.const 96))
        (i32.store (i32.const 16) (i32.const 35))
        (return (i32.const 0))))
    ;; Accumulate the digits; any n large enough to overflow could never finish anyway.
    (block $done
      (loop $digits
        (br_if $done (i32.ge_u (local.get $at) (local.get $end_input)))
        (br_if $done (i32.eqz (call $is_digit (i32.load8_u (local.get $at)))))
        (local.set $n (i32.add (i32.mul (local.get $n) (i32.const 10))
                               (i32.sub (i32.load8_u (local.get $at)) (i32.const 48))))
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (br $digits)))
    (local.set $end (call $utoa (call $fib (local.get $n)) (i32.const 45)))
    (i32.store8 (local.get $end) (i32.const 125)) ;; '}'
    (i32.store8 (i32.const 0) (i32.const 0))
    (i32.store (i32.const 4) (i32.const 32))
    (i32.store (i32.const 8) (i32.sub (i32.add (local.get $end) (i32.const 1)) (i32.const 32)))
    (i32.const 0))

  (func (export "cabi_post_run") (param i32))
)
