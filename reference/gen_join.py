"""Reference data for joining, splitting and rearranging: cat, stack, hstack/vstack/dstack,
chunk, split (by size and by sizes), unbind, flip, roll, repeat, tile, repeat_interleave.

Run: python3 reference/gen_join.py  ->  reference/data/join.safetensors
"""
import torch

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("join")

ALL_DT = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool]


def short(dt):
    return str(dt).replace("torch.", "")


def rnd(shape, dt=torch.float32):
    if dt.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * 6 - 3).to(dt)
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    if dt == torch.uint8:
        return torch.randint(0, 20, shape, dtype=dt)
    return torch.randint(-20, 20, shape, dtype=dt)


# ------------------------------------------------------------------ cat
for dt in ALL_DT:
    rf.case(f"cat_{short(dt)}", "cat", [rnd((2, 3), dt), rnd((4, 3), dt)], lambda *ts: torch.cat(ts, 0),
            call="torch.cat([a, b], 0)", args={"dim": 0})
for d in (0, 1, 2, -1, -2):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for k, s in enumerate(shapes):
        s[d] = k + 1
    rf.case(f"cat_dim{d}", "cat", [rnd(tuple(s)) for s in shapes], lambda *ts, d=d: torch.cat(ts, d),
            call=f"torch.cat([a, b, c], {d})", args={"dim": d})
PROMO = [(torch.float32, torch.int64), (torch.bool, torch.int32), (torch.uint8, torch.int64),
         (torch.float16, torch.bfloat16), (torch.int32, torch.float64), (torch.bool, torch.float16)]
for a, b in PROMO:
    rf.case(f"cat_promote_{short(a)}_{short(b)}", "cat", [rnd((2, 2), a), rnd((3, 2), b)],
            lambda *ts: torch.cat(ts, 0), call=f"torch.cat([a:{short(a)}, b:{short(b)}])", args={"dim": 0})
rf.case("cat_promote_three", "cat", [rnd((2,), torch.uint8), rnd((1,), torch.bool), rnd((3,), torch.float16)],
        lambda *ts: torch.cat(ts, 0), call="torch.cat([u8, bool, f16])", args={"dim": 0})
rf.case("cat_skip_legacy_empty", "cat", [rnd((2, 3)), torch.zeros(0), rnd((1, 3))], lambda *ts: torch.cat(ts, 0),
        call="torch.cat([a[2,3], zeros(0), b[1,3]])", args={"dim": 0})
rf.case("cat_skip_legacy_empty_dim1", "cat", [rnd((2, 3)), torch.zeros(0, dtype=torch.float64)],
        lambda *ts: torch.cat(ts, 1), call="torch.cat([a[2,3], zeros(0):f64], 1)", args={"dim": 1})
rf.case("cat_all_empty_1d", "cat", [torch.zeros(0), torch.zeros(0, dtype=torch.int64)],
        lambda *ts: torch.cat(ts, 0), call="torch.cat([zeros(0), zeros(0):i64])", args={"dim": 0})
rf.case("cat_empty_other_dim", "cat", [rnd((0, 3)), rnd((2, 3)), rnd((0, 3))], lambda *ts: torch.cat(ts, 0),
        call="torch.cat([zeros(0,3), a, zeros(0,3)])", args={"dim": 0})
rf.case("cat_zero_width", "cat", [rnd((2, 0)), rnd((2, 0))], lambda *ts: torch.cat(ts, 1),
        call="torch.cat([zeros(2,0), zeros(2,0)], 1)", args={"dim": 1})
rf.case("cat_single", "cat", [rnd((3, 2))], lambda *ts: torch.cat(ts, 1), call="torch.cat([a], 1)", args={"dim": 1})
rf.case("cat_noncontig", "cat", [rnd((4, 3)), rnd((4, 6)), rnd((2, 4))], lambda *ts: torch.cat(ts, 1),
        call="torch.cat([a, b[:, ::2], c.t()], 1)", args={"dim": 1},
        views=[None, [["slice", 1, 0, None, 2]], [["t"]]])
rf.case("cat_expanded", "cat", [rnd((1, 3)), rnd((2, 3))], lambda *ts: torch.cat(ts, 0),
        call="torch.cat([a.expand(4, 3), b])", args={"dim": 0}, views=[[["expand", [4, 3]]], None])
rf.case("cat_many", "cat", [rnd((2, k % 3 + 1)) for k in range(12)], lambda *ts: torch.cat(ts, 1),
        call="torch.cat([12 tensors], 1)", args={"dim": 1})
rf.error_case("cat_rank_mismatch", "cat", [rnd((2, 3)), rnd((3,))], lambda *ts: torch.cat(ts, 0),
              call="torch.cat([a[2,3], b[3]])", args={"dim": 0})
rf.error_case("cat_size_mismatch", "cat", [rnd((2, 3)), rnd((2, 2))], lambda *ts: torch.cat(ts, 0),
              call="torch.cat([a[2,3], b[2,2]], 0)", args={"dim": 0})
rf.error_case("cat_zero_dim", "cat", [torch.tensor(1.), torch.tensor(2.)], lambda *ts: torch.cat(ts, 0),
              call="torch.cat([tensor(1.), tensor(2.)])", args={"dim": 0})
rf.error_case("cat_bad_dim", "cat", [rnd((2, 3)), rnd((2, 3))], lambda *ts: torch.cat(ts, 2),
              call="torch.cat([a, b], 2)", args={"dim": 2})
rf.error_case("cat_empty_list", "cat", [], lambda *ts: torch.cat(ts, 0), call="torch.cat([])", args={"dim": 0})

# ------------------------------------------------------------------ stack family
for d in (0, 1, 2, -1, -3):
    rf.case(f"stack_dim{d}", "stack", [rnd((2, 3)), rnd((2, 3)), rnd((2, 3))], lambda *ts, d=d: torch.stack(ts, d),
            call=f"torch.stack([a, b, c], {d})", args={"dim": d})
rf.case("stack_promote", "stack", [rnd((3,), torch.int32), rnd((3,), torch.float16)],
        lambda *ts: torch.stack(ts, 0), call="torch.stack([i32, f16])", args={"dim": 0})
rf.case("stack_scalars", "stack", [torch.tensor(1.), torch.tensor(2.)], lambda *ts: torch.stack(ts, -1),
        call="torch.stack([tensor(1.), tensor(2.)], -1)", args={"dim": -1})
rf.case("stack_empty", "stack", [torch.zeros(0), torch.zeros(0)], lambda *ts: torch.stack(ts, 1),
        call="torch.stack([zeros(0), zeros(0)], 1)", args={"dim": 1})
rf.case("stack_noncontig", "stack", [rnd((3, 2)), rnd((2, 3))], lambda *ts: torch.stack(ts, 1),
        call="torch.stack([a.t(), b], 1)", args={"dim": 1}, views=[[["t"]], None])
rf.error_case("stack_unequal", "stack", [rnd((2, 3)), rnd((2, 2))], lambda *ts: torch.stack(ts, 0),
              call="torch.stack([a[2,3], b[2,2]])", args={"dim": 0})
rf.error_case("stack_bad_dim", "stack", [rnd((2, 3)), rnd((2, 3))], lambda *ts: torch.stack(ts, 3),
              call="torch.stack([a, b], 3)", args={"dim": 3})
rf.error_case("stack_empty_list", "stack", [], lambda *ts: torch.stack(ts, 0), call="torch.stack([])",
              args={"dim": 0})
for name, fn in (("hstack", torch.hstack), ("vstack", torch.vstack), ("dstack", torch.dstack)):
    rf.case(f"{name}_1d", name, [rnd((3,)), rnd((3,))], lambda *ts, fn=fn: fn(ts), call=f"torch.{name}([a[3], b[3]])")
    rf.case(f"{name}_2d", name, [rnd((2, 3)), rnd((2, 3), torch.int64)], lambda *ts, fn=fn: fn(ts),
            call=f"torch.{name}([a[2,3], b[2,3]:i64])")
    rf.case(f"{name}_scalars", name, [torch.tensor(1.), torch.tensor(2.)], lambda *ts, fn=fn: fn(ts),
            call=f"torch.{name}([tensor(1.), tensor(2.)])")
    rf.case(f"{name}_3d", name, [rnd((2, 3, 2)), rnd((2, 3, 2))], lambda *ts, fn=fn: fn(ts),
            call=f"torch.{name}([a[2,3,2], b[2,3,2]])")
rf.case("hstack_mixed", "hstack", [torch.tensor(1.), rnd((2,))], lambda *ts: torch.hstack(ts),
        call="torch.hstack([tensor(1.), b[2]])")
rf.case("hstack_cols", "hstack", [rnd((2, 1)), rnd((2, 3))], lambda *ts: torch.hstack(ts),
        call="torch.hstack([a[2,1], b[2,3]])")
rf.case("vstack_rows", "vstack", [rnd((3,)), rnd((2, 3))], lambda *ts: torch.vstack(ts),
        call="torch.vstack([a[3], b[2,3]])")

# ------------------------------------------------------------------ splitting (views)
x = rnd((5, 6))
for chunks, d in ((2, 0), (3, 0), (4, 1), (6, 1), (7, 0), (1, -1)):
    rf.case(f"chunk_{chunks}_{d}", "chunk", [x], lambda a, c=chunks, d=d: torch.chunk(a, c, d),
            call=f"torch.chunk(a, {chunks}, {d})", args={"chunks": chunks, "dim": d})
rf.case("chunk_empty", "chunk", [torch.zeros(0, 2)], lambda a: torch.chunk(a, 3, 0), call="torch.chunk(zeros(0,2), 3)",
        args={"chunks": 3, "dim": 0})
rf.case("chunk_noncontig", "chunk", [x], lambda a: torch.chunk(a, 2, 1), call="torch.chunk(a.t(), 2, 1)",
        args={"chunks": 2, "dim": 1}, views=[[["t"]]])
rf.error_case("chunk_zero", "chunk", [x], lambda a: torch.chunk(a, 0, 0), call="torch.chunk(a, 0)",
              args={"chunks": 0, "dim": 0})
rf.error_case("chunk_scalar", "chunk", [torch.tensor(1.)], lambda a: torch.chunk(a, 2, 0),
              call="torch.chunk(tensor(1.), 2)", args={"chunks": 2, "dim": 0})
for size, d in ((2, 0), (4, 1), (6, 1), (10, 0), (1, -1)):
    rf.case(f"split_{size}_{d}", "split", [x], lambda a, s=size, d=d: torch.split(a, s, d),
            call=f"torch.split(a, {size}, {d})", args={"split_size": size, "dim": d})
rf.case("split_empty", "split", [torch.zeros(0, 3)], lambda a: torch.split(a, 2, 0),
        call="torch.split(zeros(0,3), 2)", args={"split_size": 2, "dim": 0})
rf.case("split_zero_of_empty", "split", [torch.zeros(0, 3)], lambda a: torch.split(a, 0, 0),
        call="torch.split(zeros(0,3), 0)", args={"split_size": 0, "dim": 0})
rf.error_case("split_zero", "split", [x], lambda a: torch.split(a, 0, 0), call="torch.split(a, 0)",
              args={"split_size": 0, "dim": 0})
for sizes, d in (([1, 4], 0), ([2, 0, 4], 1), ([6], -1), ([3, 3], -1)):
    rf.case(f"split_sizes_{'_'.join(map(str, sizes))}_{d}", "split_sizes", [x],
            lambda a, s=sizes, d=d: torch.split(a, s, d), call=f"torch.split(a, {sizes}, {d})",
            args={"sizes": sizes, "dim": d})
rf.error_case("split_sizes_bad_sum", "split_sizes", [x], lambda a: torch.split(a, [2, 4], 0),
              call="torch.split(a[5,6], [2, 4], 0)", args={"sizes": [2, 4], "dim": 0})
for d in (0, 1, -1):
    rf.case(f"unbind_{d}", "unbind", [rnd((3, 2, 4))], lambda a, d=d: torch.unbind(a, d), call=f"torch.unbind(a, {d})",
            args={"dim": d})
rf.case("unbind_noncontig", "unbind", [rnd((3, 4))], lambda a: torch.unbind(a, 0), call="torch.unbind(a.t(), 0)",
        args={"dim": 0}, views=[[["t"]]])
rf.error_case("unbind_scalar", "unbind", [torch.tensor(1.)], lambda a: torch.unbind(a, 0),
              call="torch.unbind(tensor(1.), 0)", args={"dim": 0})

# ------------------------------------------------------------------ flip / roll
for dt in ALL_DT:
    rf.case(f"flip_{short(dt)}", "flip", [rnd((3, 4), dt)], lambda a: torch.flip(a, [0, 1]),
            call="torch.flip(a, [0, 1])", args={"dims": [0, 1]})
x = rnd((2, 3, 4))
for dims in ([0], [1], [2], [-1], [0, 2], [2, 0, 1], []):
    rf.case(f"flip_{'_'.join(map(str, dims)) or 'none'}", "flip", [x], lambda a, dims=dims: torch.flip(a, dims),
            call=f"torch.flip(a, {dims})", args={"dims": dims})
rf.case("flip_noncontig", "flip", [rnd((4, 6))], lambda a: torch.flip(a, [1]), call="torch.flip(a.t()[:, ::2], [1])",
        args={"dims": [1]}, views=[[["t"], ["slice", 1, 0, None, 2]]])
rf.case("flip_scalar", "flip", [torch.tensor(3.)], lambda a: torch.flip(a, [0]), call="torch.flip(tensor(3.), [0])",
        args={"dims": [0]})
rf.case("flip_empty", "flip", [torch.zeros(0, 3)], lambda a: torch.flip(a, [1]), call="torch.flip(zeros(0,3), [1])",
        args={"dims": [1]})
rf.error_case("flip_repeat_dim", "flip", [x], lambda a: torch.flip(a, [0, 0]), call="torch.flip(a, [0, 0])",
              args={"dims": [0, 0]})
rf.error_case("flip_bad_dim", "flip", [x], lambda a: torch.flip(a, [3]), call="torch.flip(a, [3])",
              args={"dims": [3]})
for shifts, dims in (([1], [0]), ([-1], [1]), ([5], [2]), ([2, -7], [0, 2]), ([3], []), ([-13], []), ([0], [1]),
                     ([1, 1], [1, 1])):
    rf.case(f"roll_{'_'.join(map(str, shifts))}_{'_'.join(map(str, dims)) or 'flat'}", "roll", [x],
            lambda a, s=shifts, d=dims: torch.roll(a, s, d), call=f"torch.roll(a, {shifts}, {dims})",
            args={"shifts": shifts, "dims": dims})
rf.case("roll_int", "roll", [rnd((5,), torch.int32)], lambda a: torch.roll(a, 2), call="torch.roll(a:int32, 2)",
        args={"shifts": [2], "dims": []})
rf.case("roll_noncontig", "roll", [rnd((4, 3))], lambda a: torch.roll(a, 1), call="torch.roll(a.t(), 1)",
        args={"shifts": [1], "dims": []}, views=[[["t"]]])
rf.case("roll_scalar", "roll", [torch.tensor(3.)], lambda a: torch.roll(a, 1), call="torch.roll(tensor(3.), 1)",
        args={"shifts": [1], "dims": []})
rf.case("roll_empty", "roll", [torch.zeros(0, 3)], lambda a: torch.roll(a, 1, 0), call="torch.roll(zeros(0,3), 1, 0)",
        args={"shifts": [1], "dims": [0]})
rf.error_case("roll_misaligned", "roll", [x], lambda a: torch.roll(a, [1, 2], [0]),
              call="torch.roll(a, [1, 2], [0])", args={"shifts": [1, 2], "dims": [0]})

# ------------------------------------------------------------------ repeat / tile / repeat_interleave
for reps in ([2, 3], [1, 1], [2, 1, 2], [0, 2], [3, 2, 1, 1]):
    rf.case(f"repeat_{'_'.join(map(str, reps))}", "repeat", [rnd((2, 3))], lambda a, r=reps: a.repeat(*r),
            call=f"a.repeat({reps})", args={"repeats": reps})
rf.case("repeat_bool", "repeat", [rnd((3,), torch.bool)], lambda a: a.repeat(2, 2), call="a:bool.repeat(2, 2)",
        args={"repeats": [2, 2]})
rf.case("repeat_noncontig", "repeat", [rnd((3, 2))], lambda a: a.repeat(2, 2), call="a.t().repeat(2, 2)",
        args={"repeats": [2, 2]}, views=[[["t"]]])
rf.case("repeat_scalar", "repeat", [torch.tensor(4.)], lambda a: a.repeat(3), call="tensor(4.).repeat(3)",
        args={"repeats": [3]})
rf.error_case("repeat_too_few", "repeat", [rnd((2, 3))], lambda a: a.repeat(2), call="a[2,3].repeat(2)",
              args={"repeats": [2]})
for reps in ([2], [2, 2], [1, 2, 2], []):
    rf.case(f"tile_{'_'.join(map(str, reps)) or 'none'}", "tile", [rnd((2, 3))], lambda a, r=reps: torch.tile(a, r),
            call=f"torch.tile(a, {reps})", args={"reps": reps})
for dt in (torch.float32, torch.int64, torch.bool):
    rf.case(f"repeat_interleave_flat_{short(dt)}", "repeat_interleave", [rnd((2, 3), dt)],
            lambda a: torch.repeat_interleave(a, 2), call="torch.repeat_interleave(a, 2)",
            args={"repeats": 2, "dim": None})
for d in (0, 1, -1):
    rf.case(f"repeat_interleave_dim{d}", "repeat_interleave", [rnd((2, 3))],
            lambda a, d=d: torch.repeat_interleave(a, 3, dim=d), call=f"torch.repeat_interleave(a, 3, dim={d})",
            args={"repeats": 3, "dim": d})
rf.case("repeat_interleave_zero", "repeat_interleave", [rnd((2, 3))],
        lambda a: torch.repeat_interleave(a, 0, dim=1), call="torch.repeat_interleave(a, 0, dim=1)",
        args={"repeats": 0, "dim": 1})
rf.case("repeat_interleave_noncontig", "repeat_interleave", [rnd((3, 2))],
        lambda a: torch.repeat_interleave(a, 2, dim=1), call="torch.repeat_interleave(a.t(), 2, dim=1)",
        args={"repeats": 2, "dim": 1}, views=[[["t"]]])
rf.case("repeat_interleave_scalar", "repeat_interleave", [torch.tensor(3.)],
        lambda a: torch.repeat_interleave(a, 2), call="torch.repeat_interleave(tensor(3.), 2)",
        args={"repeats": 2, "dim": None})
rf.case("repeat_interleave_t_dim0", "repeat_interleave_tensor", [rnd((3, 2)), torch.tensor([1, 0, 2])],
        lambda a, r: torch.repeat_interleave(a, r, dim=0), call="torch.repeat_interleave(a, [1, 0, 2], dim=0)",
        args={"dim": 0})
rf.case("repeat_interleave_t_one", "repeat_interleave_tensor", [rnd((3, 2)), torch.tensor([2])],
        lambda a, r: torch.repeat_interleave(a, r, dim=1), call="torch.repeat_interleave(a, [2], dim=1)",
        args={"dim": 1})
rf.case("repeat_interleave_t_0d", "repeat_interleave_tensor", [rnd((3, 2)), torch.tensor(2)],
        lambda a, r: torch.repeat_interleave(a, r, dim=-1), call="torch.repeat_interleave(a, tensor(2), dim=-1)",
        args={"dim": -1})
rf.case("repeat_interleave_t_flat", "repeat_interleave_tensor", [rnd((2, 2)), torch.tensor([1, 2, 0, 3])],
        lambda a, r: torch.repeat_interleave(a, r), call="torch.repeat_interleave(a[2,2], [1, 2, 0, 3])",
        args={"dim": None})
rf.case("repeat_interleave_t_i32", "repeat_interleave_tensor", [rnd((2, 2)), torch.tensor([3, 1], dtype=torch.int32)],
        lambda a, r: torch.repeat_interleave(a, r, dim=0), call="torch.repeat_interleave(a, [3, 1]:int32, dim=0)",
        args={"dim": 0})
rf.error_case("repeat_interleave_t_len", "repeat_interleave_tensor", [rnd((2, 3)), torch.tensor([1, 2])],
              lambda a, r: torch.repeat_interleave(a, r), call="torch.repeat_interleave(a[2,3], [1, 2])",
              args={"dim": None})
rf.error_case("repeat_interleave_t_neg", "repeat_interleave_tensor", [rnd((2, 3)), torch.tensor([1, -2])],
              lambda a, r: torch.repeat_interleave(a, r, dim=0), call="torch.repeat_interleave(a, [1, -2], dim=0)",
              args={"dim": 0})
rf.error_case("repeat_interleave_t_float", "repeat_interleave_tensor", [rnd((2, 3)), torch.tensor([1., 2.])],
              lambda a, r: torch.repeat_interleave(a, r, dim=0), call="torch.repeat_interleave(a, [1., 2.], dim=0)",
              args={"dim": 0})
rf.case("repeat_interleave_counts", "repeat_interleave_counts", [torch.tensor([2, 0, 1, 3])],
        torch.repeat_interleave, call="torch.repeat_interleave(tensor([2, 0, 1, 3]))")

rf.save()
