;; table-hog-wat: world `tool`; `run` grows eight funcref tables, round after
;; round, each by a chunk of entries: 4 Mi at first, halved whenever a round
;; grows none of them. When not one more entry fits in any table (each is at
;; its maximum) it traps with `unreachable`, as an allocator that found
;; `table.grow` failing would. The tables declare no maximum on purpose: the
;; host's memory cap is what this component tests (without one, eight tables
;; grown by 10 million entries took a server from 645 MB to 3.2 GB).
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (table $t0 0 funcref)
  (table $t1 0 funcref)
  (table $t2 0 funcref)
  (table $t3 0 funcref)
  (table $t4 0 funcref)
  (table $t5 0 funcref)
  (table $t6 0 funcref)
  (table $t7 0 funcref)

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

  ;; Grows every table by $n entries; returns how many of them grew.
  (func $grow_all (param $n i32) (result i32)
    (i32.add
      (i32.add
        (i32.add (i32.ne (table.grow $t0 (ref.null func) (local.get $n)) (i32.const -1))
                 (i32.ne (table.grow $t1 (ref.null func) (local.get $n)) (i32.const -1)))
        (i32.add (i32.ne (table.grow $t2 (ref.null func) (local.get $n)) (i32.const -1))
                 (i32.ne (table.grow $t3 (ref.null func) (local.get $n)) (i32.const -1))))
      (i32.add
        (i32.add (i32.ne (table.grow $t4 (ref.null func) (local.get $n)) (i32.const -1))
                 (i32.ne (table.grow $t5 (ref.null func) (local.get $n)) (i32.const -1)))
        (i32.add (i32.ne (table.grow $t6 (ref.null func) (local.get $n)) (i32.const -1))
                 (i32.ne (table.grow $t7 (ref.null func) (local.get $n)) (i32.const -1))))))

  (func (export "run") (param i32 i32 i32 i32 i64) (result i32)
    (local $chunk i32)
    (local.set $chunk (i32.const 0x400000))
    (loop $round
      (if (i32.eqz (call $grow_all (local.get $chunk)))
        (then
          (if (i32.eq (local.get $chunk) (i32.const 1)) (then unreachable))
          (local.set $chunk (i32.shr_u (local.get $chunk) (i32.const 1)))))
      (br $round))
    unreachable)

  (func (export "cabi_post_run") (param i32))
)
