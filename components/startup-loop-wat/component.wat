;; startup-loop-wat: world `tool`; the core module's start function loops
;; forever, so every instantiation runs until fuel (or the deadline) stops it,
;; before `run` can be called: fuel spent in start-up code is metered and must
;; be reported as such. `run` itself would return its input, as echo-wat does.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))

  (func $spin (loop $forever (br $forever)))
  (start $spin)

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

  (func (export "run") (param $input i32) (param $input_len i32) (param $config i32) (param $config_len i32) (param $deadline i64) (result i32)
    (i32.store8 (i32.const 0) (i32.const 0))
    (i32.store (i32.const 4) (local.get $input))
    (i32.store (i32.const 8) (local.get $input_len))
    (i32.const 0))

  (func (export "cabi_post_run") (param i32))
)
