#!/usr/bin/env python3
"""Writes the .fir inputs of the combine-collectives goldens (not the outputs).

Run from anywhere: python3 tests/golden/collectives/combine/gen.py
Then bless: UPDATE_GOLDEN=1 cargo test -p fuel-tests --test golden
and review every changed .out.fir / .out.dot by reading it.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

GROUPS = {
    "cpu4": ["cpu:0", "cpu:1", "cpu:2", "cpu:3"],
    "cuda0-vulkan0-cpu0": ["cuda:0", "vulkan:0", "cpu:0"],
}


def many(name, devices, sizes, run, comment, dtype="f32", ops=None):
    """len(sizes) independent all_reduces of f32[size] over devices."""
    lines = [f"// RUN: --passes {run}"] + [f"// {c}" for c in comment]
    lines.append(f"graph @{name.replace('-', '_')} {{")
    n = 0
    outs = []
    for k, size in enumerate(sizes):
        op = ops[k % len(ops)] if ops else "sum"
        first = n
        for r, d in enumerate(devices):
            lines.append(f'  %{n} = input "g{k}_{r}" @{d} : {dtype}[{size}]')
            n += 1
        args = ", ".join(f"%{first + r}" for r in range(len(devices)))
        lines.append(f"  %{n}:{len(devices)} = all_reduce.{op} {args} : {dtype}[{size}]")
        outs += [f"%{n}#{r}" for r in range(len(devices))]
        n += 1
    lines.append(f"  return {', '.join(outs)}")
    lines.append("}")
    with open(os.path.join(HERE, name + ".fir"), "w") as f:
        f.write("\n".join(lines) + "\n")


# Mixed sizes, repeatable: 4 B to 16 KiB per rank.
MIXED = [1, 16, 256, 4096, 3, 64, 1024, 7]


def mixed(count):
    return [MIXED[k % len(MIXED)] * (1 + k // len(MIXED)) for k in range(count)]


for gname, devs in GROUPS.items():
    many(f"{gname}-3", devs, [8, 64, 1000], "combine-collectives",
         ["Three small all_reduces of mixed sizes: the cost model's call."])
    many(f"{gname}-100", devs, mixed(100), "combine-collectives",
         ["100 all_reduces of mixed sizes (4 B to about 200 KiB per rank)."])
    many(f"{gname}-100-threshold", devs, mixed(100), "combine-collectives{threshold=8K}",
         ["The same 100 with at most 8 KiB per rank in a bucket."])
    many(f"{gname}-5-default-pipeline", devs, [8, 16, 32, 64, 128],
         "combine-collectives,lower-collectives,insert-cross-device-copies,split-cross-vendor-copies,cse,dce",
         ["Five small ones through the default pipeline: one lowered all_reduce."])

many("cpu4-threshold-0", GROUPS["cpu4"], [8, 8, 8], "combine-collectives{threshold=0}",
     ["threshold=0: nothing merges."])
many("cpu4-mixed-ops", GROUPS["cpu4"], [8, 8, 8, 8, 8, 8], "combine-collectives{threshold=1M}",
     ["Different reduce ops never share a bucket: sum with sum, max with max."],
     ops=["sum", "max"])


def write(name, run, comment, body):
    lines = [f"// RUN: --passes {run}"] + [f"// {c}" for c in comment]
    lines.append(f"graph @{name.replace('-', '_')} {{")
    lines += ["  " + l for l in body]
    lines.append("}")
    with open(os.path.join(HERE, name + ".fir"), "w") as f:
        f.write("\n".join(lines) + "\n")


# A chain: the second all_reduce reads the first one's result, so they must
# not merge; the third is free and merges with the first.
write("chain-must-not-merge", "combine-collectives{threshold=1M}",
      ["%4 feeds %7 through an add: they must not merge. %10 is independent",
       "of %4 but %7 depends on %4, so %10 joins %4 or %7, never both."],
      ['%0 = input "a0" @cpu:0 : f32[8]',
       '%1 = input "a1" @cpu:1 : f32[8]',
       '%2 = input "b0" @cpu:0 : f32[8]',
       '%3 = input "b1" @cpu:1 : f32[8]',
       '%4:2 = all_reduce.sum %0, %1 : f32[8]',
       '%5 = add %4#0, %2 @cpu:0 : f32[8]',
       '%6 = add %4#1, %3 @cpu:1 : f32[8]',
       '%7:2 = all_reduce.sum %5, %6 : f32[8]',
       '%8 = input "c0" @cpu:0 : f32[8]',
       '%9 = input "c1" @cpu:1 : f32[8]',
       '%10:2 = all_reduce.sum %8, %9 : f32[8]',
       'return %7#0, %7#1, %10#0, %10#1'])

# A chain of three through the results: none merges with another.
write("chain-of-three", "combine-collectives{threshold=1M}",
      ["Each all_reduce reads the previous one's result: nothing merges."],
      ['%0 = input "a0" @cpu:0 : f32[8]',
       '%1 = input "a1" @cpu:1 : f32[8]',
       '%2:2 = all_reduce.sum %0, %1 : f32[8]',
       '%3:2 = all_reduce.sum %2#0, %2#1 : f32[8]',
       '%4:2 = all_reduce.sum %3#0, %3#1 : f32[8]',
       'return %4#0, %4#1'])

# A and B are sums, C and D maxima; D feeds B and A feeds C. {A, B}
# merges; {C, D} has no path inside it, but with {A, B} as one node it
# would close a cycle (D -> B=A -> C), so C and D stay apart.
write("cross-bucket-cycle", "combine-collectives{threshold=1M}",
      ["A=%2 and B=%8 are sums, D=%5 and C=%11 maxima; B reads D, C reads A.",
       "{A, B} merges; {C, D} would then close a cycle through it",
       "(D -> B, merged with A -> C): the check sees buckets as one node."],
      ['%0 = input "a0" @cpu:0 : f32[4]',
       '%1 = input "a1" @cpu:1 : f32[4]',
       '%2:2 = all_reduce.sum %0, %1 : f32[4]',
       '%3 = input "d0" @cpu:0 : f32[4]',
       '%4 = input "d1" @cpu:1 : f32[4]',
       '%5:2 = all_reduce.max %3, %4 : f32[4]',
       '%6 = add %5#0, %5#0 @cpu:0 : f32[4]',
       '%7 = add %5#1, %5#1 @cpu:1 : f32[4]',
       '%8:2 = all_reduce.sum %6, %7 : f32[4]',
       '%9 = add %2#0, %2#0 @cpu:0 : f32[4]',
       '%10 = add %2#1, %2#1 @cpu:1 : f32[4]',
       '%11:2 = all_reduce.max %9, %10 : f32[4]',
       'return %8#0, %8#1, %11#0, %11#1'])
