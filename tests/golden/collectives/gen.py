#!/usr/bin/env python3
"""Writes the .fir inputs of the lower-collectives goldens (not the outputs).

Run from anywhere: python3 tests/golden/collectives/gen.py
Then bless: UPDATE_GOLDEN=1 cargo test -p fuel-tests --test golden
and review every changed .out.fir / .out.dot by reading it.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

GROUPS = {
    "cpu0": ["cpu:0"],
    "cpu0-cpu1": ["cpu:0", "cpu:1"],
    "cuda0-vulkan0": ["cuda:0", "vulkan:0"],
    "cpu0-cuda0-vulkan0": ["cpu:0", "cuda:0", "vulkan:0"],
    "vulkan0-cuda0": ["vulkan:0", "cuda:0"],
    "cuda2-vulkan2": ["cuda:0", "cuda:1", "vulkan:0", "vulkan:1"],
    "mix8": ["cuda:0", "cpu:0", "vulkan:0", "cuda:1", "cpu:1", "vulkan:1", "cuda:2", "cpu:0"],
}
ALGS = ["auto", "star", "hierarchical", "ring", "tree"]


def pipeline(alg, extra=""):
    opts = [] if alg == "auto" else [f"algorithm={alg}"]
    if extra:
        opts.append(extra)
    return "lower-collectives" + ("{" + ", ".join(opts) + "}" if opts else "")


def case(path, passes, why, name, devs, ty, body_op, results, topology=None):
    """Writes one .fir: shard i on devs[i], of type `ty`, or of type ty[i]
    where `ty` is a list (uneven shards)."""
    tys = ty if isinstance(ty, list) else [ty] * len(devs)
    lines = [f"// RUN: --passes {passes}" + (f" --topology {topology}" if topology else "")]
    lines += [f"// {w}" for w in why]
    lines.append(f"graph @{name} {{")
    for i, (d, t) in enumerate(zip(devs, tys)):
        lines.append(f'  %{i} = input "s{i}" @{d} : {t}')
    lines.append(body_op)
    lines.append(f"  return {results}")
    lines.append("}")
    full = os.path.join(HERE, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write("\n".join(lines) + "\n")


def group_options(gname, alg=None):
    """(extra pass option, topology file, notes) of a group: mix8 is lowered
    against peer01.topo, where cuda:0 and cuda:1 are peers (and its file
    says so), and its tree with arity=3; the other groups take none."""
    if gname != "mix8":
        return "", None, []
    return ("arity=3" if alg == "tree" else ""), "peer01.topo", ["cuda:0 and cuda:1 are peers here (peer01.topo)."]


def shards(n):
    return ", ".join(f"%{i}" for i in range(n))


def outs(node, n):
    return ", ".join(f"%{node}#{i}" for i in range(n))


# 1. all_reduce.sum on every group with every algorithm.
for gname, devs in GROUPS.items():
    n = len(devs)
    for alg in ALGS:
        extra, topo, peers = group_options(gname, alg)
        case(
            f"all-reduce/{gname}-{alg}.fir",
            pipeline(alg, extra),
            [f"all_reduce.sum over [{', '.join(devs)}] with algorithm={alg}."]
            + peers,
            f"all_reduce_{gname.replace('-', '_')}_{alg}",
            devs,
            "f32[8]",
            f"  %{n}:{n} = all_reduce.sum {shards(n)} : f32[8]",
            outs(n, n),
            topo,
        )

# 2. every collective kind, on a CPU+CUDA+Vulkan group and on a GPU-led pair.
KIND_GROUPS = {
    "cpu0-cuda0-vulkan0": ["cpu:0", "cuda:0", "vulkan:0"],
    "vulkan0-cuda0": ["vulkan:0", "cuda:0"],
}
for gname, devs in KIND_GROUPS.items():
    n = len(devs)
    for alg in ALGS:
        p = pipeline(alg)
        g = gname.replace("-", "_")
        case(f"kinds/reduce-max-root1-{gname}-{alg}.fir", p,
             ["reduce.max onto rank 1."], f"reduce_{g}_{alg}", devs, "i32[6,4]",
             f"  %{n} = reduce.max {shards(n)} {{root=1}} : i32[6,4]", f"%{n}")
        case(f"kinds/broadcast-{gname}-{alg}.fir", p,
             ["broadcast from rank 0 to every rank (and once more to cpu:1)."],
             f"broadcast_{g}_{alg}", devs[:1], "i32[6,4]",
             f"  %1:{n + 1} = broadcast %0 -> [{', '.join(devs)}, cpu:1] : i32[6,4]",
             outs(1, n + 1))
        case(f"kinds/all-gather-{gname}-{alg}.fir", p,
             ["all_gather along axis 1."], f"all_gather_{g}_{alg}", devs, "i32[6,4]",
             f"  %{n}:{n} = all_gather {shards(n)} {{axis=1}} : i32[6,{4 * n}]",
             outs(n, n))
        rows = 6
        case(f"kinds/reduce-scatter-{gname}-{alg}.fir", p,
             ["reduce_scatter.sum along axis 0: rank i gets rows [i*k, (i+1)*k)."],
             f"reduce_scatter_{g}_{alg}", devs, f"i32[{rows},4]",
             f"  %{n}:{n} = reduce_scatter.sum {shards(n)} {{axis=0}} : i32[{rows // n},4]",
             outs(n, n))
        case(f"kinds/all-reduce-mean-{gname}-{alg}.fir", p,
             ["all_reduce.mean: the sum is divided by the rank count once, where it is complete."],
             f"mean_{g}_{alg}", devs, "f32[8]",
             f"  %{n}:{n} = all_reduce.mean {shards(n)} : f32[8]", outs(n, n))
        case(f"kinds/all-reduce-prod-u8-{gname}-{alg}.fir", p,
             ["all_reduce.prod on u8 (wrapping): exact in any order."],
             f"prod_{g}_{alg}", devs, "u8[5]",
             f"  %{n}:{n} = all_reduce.prod {shards(n)} : u8[5]", outs(n, n))

# 3. Mean of a narrow dtype sums in its accumulator: casts before and after.
WIDE = {
    "f16": (["cpu:0", "cuda:0", "vulkan:0"], "f16[8]", "f32"),
    "u8": (["cpu:0", "cpu:1", "cuda:0"], "u8[6]", "u64"),
}
for dt, (devs, ty, acc) in WIDE.items():
    n = len(devs)
    g = "-".join(d.replace(":", "") for d in devs)
    for alg in ALGS:
        case(f"mean-wide/all-reduce-mean-{dt}-{g}-{alg}.fir", pipeline(alg),
             [f"all_reduce.mean of {dt} sums in {acc}: each shard is cast to {acc} on its",
              f"device, the {acc} mean is lowered as any other, and each result is cast back."],
             f"mean_{dt}_{alg}", devs, ty,
             f"  %{n}:{n} = all_reduce.mean {shards(n)} : {ty}", outs(n, n))

# 4. options and corner cases: (file, passes, why, name, devices, type, op)
# of one all_reduce.
OPTIONS = [
    ("star-reduce-at-cuda0", "lower-collectives{algorithm=star, reduce_at=cuda:0}",
     ["reduce_at forces the star's point: vulkan:0 stages through cpu:0 both ways."],
     "star_reduce_at", ["cpu:0", "cuda:0", "vulkan:0"], "f32[8]", "min"),
    ("ring-uneven-chunks", "lower-collectives{algorithm=ring}",
     ["10 entries over 3 ranks: chunks of 4, 3 and 3."],
     "ring_uneven", ["cpu:0", "cpu:1", "cuda:0"], "f32[10]", "sum"),
    ("ring-falls-back", "lower-collectives{algorithm=ring}",
     ["A 2-entry tensor cannot be cut for 3 ranks: the ring falls back to the tree."],
     "ring_fallback", ["cpu:0", "cuda:0", "vulkan:0"], "f32[2]", "sum"),
    ("repeated-device", "lower-collectives",
     ["Two shards on cpu:0: no copy between them is needed."],
     "repeated_device", ["cpu:0", "cpu:0", "cuda:0"], "i32[4]", "sum"),
    ("large-auto", "lower-collectives",
     ["A 4 MiB tensor over 4 CPUs: host arenas share one memory system (one",
      "resource in the cost model), so ring's parallel links buy nothing; auto picks star."],
     "large_auto", ["cpu:0", "cpu:1", "cpu:2", "cpu:3"], "f32[1048576]", "sum"),
]
for file, passes, why, name, devs, ty, op in OPTIONS:
    n = len(devs)
    case(f"options/{file}.fir", passes, why, name, devs, ty,
         f"  %{n}:{n} = all_reduce.{op} {shards(n)} : {ty}", outs(n, n))

# 5. several collectives in one graph share the pass's copy cache.
with open(os.path.join(HERE, "options/shared-staging.fir"), "w") as f:
    f.write("""// RUN: --passes lower-collectives{algorithm=star, reduce_at=cpu:0}
// Two all-reduces over the same shards, then an all_gather of the first's
// results: each shard crosses to cpu:0 once and feeds both reductions.
graph @shared_staging {
  %0 = input "a" @cuda:0 : i32[4]
  %1 = input "b" @vulkan:0 : i32[4]
  %2:2 = all_reduce.sum %0, %1 : i32[4]
  %3:2 = all_reduce.max %0, %1 : i32[4]
  %4:2 = all_gather %2#0, %2#1 {axis=0} : i32[8]
  return %4#1, %3#0, %2#1
}
""")


# 5. all_gather of uneven shards on every group with every algorithm: rank i
# holds i % 3 rows (rank 0 holds none), and every rank gets all of them.
for gname, devs in GROUPS.items():
    n = len(devs)
    rows = [i % 3 for i in range(n)]
    for alg in ALGS:
        extra, topo, peers = group_options(gname, alg)
        case(
            f"uneven/all-gather-{gname}-{alg}.fir",
            pipeline(alg, extra),
            [f"all_gather of uneven shards ({rows} rows) over [{', '.join(devs)}] with algorithm={alg}."]
            + peers,
            f"all_gather_uneven_{gname.replace('-', '_')}_{alg}",
            devs,
            [f"i32[{r},3]" for r in rows],
            f"  %{n}:{n} = all_gather {shards(n)} {{axis=0}} : i32[{sum(rows)},3]",
            outs(n, n),
            topo,
        )

# 6. reduce_scatter with a split (rank i gets i % 3 rows, so rank 0 gets
# none) and with the default partition of 7 rows (7 // N each, the remainder
# on the last rank), on every group with every algorithm, pairwise too.
for gname, devs in GROUPS.items():
    n = len(devs)
    split = [i % 3 for i in range(n)] if n > 1 else [2]
    rows = sum(split)
    default = [7 // n] * (n - 1) + [7 - (7 // n) * (n - 1)]
    for alg in ALGS + ["pairwise"]:
        extra, topo, peers = group_options(gname, alg)
        g = gname.replace("-", "_")
        tys = ", ".join(f"i32[{r},3]" for r in split)
        case(
            f"uneven/reduce-scatter-split-{gname}-{alg}.fir",
            pipeline(alg, extra),
            [f"reduce_scatter.sum with split={split} over [{', '.join(devs)}] with algorithm={alg}."]
            + peers,
            f"reduce_scatter_split_{g}_{alg}",
            devs,
            f"i32[{rows},3]",
            f"  %{n}:{n} = reduce_scatter.sum {shards(n)} {{axis=0, split=[{', '.join(map(str, split))}]}} : {tys}",
            outs(n, n),
            topo,
        )
        tys = ", ".join(f"f32[2,{r}]" for r in default)
        if len(set(default)) == 1:
            tys = f"f32[2,{default[0]}]"
        case(
            f"uneven/reduce-scatter-default-{gname}-{alg}.fir",
            pipeline(alg, extra),
            [f"reduce_scatter.max of 7 columns, default partition {default}, over [{', '.join(devs)}] with algorithm={alg}."]
            + peers,
            f"reduce_scatter_default_{g}_{alg}",
            devs,
            "f32[2,7]",
            f"  %{n}:{n} = reduce_scatter.max {shards(n)} {{axis=1}} : {tys}",
            outs(n, n),
            topo,
        )

# 7. all_to_all on every group (algorithm= does not apply: the note
# compares `direct` and `packed`): a split in which rank 0 receives nothing
# (so the shards are uneven too), and the default cut of 5 rows.
for gname, devs in GROUPS.items():
    n = len(devs)
    _, topo, peers = group_options(gname)
    g = gname.replace("-", "_")
    split = [[0 if j == 0 else (i + j) % 3 + (1 if n == 1 else 0) for j in range(n)] for i in range(n)]
    rows = [sum(r) for r in split]
    got = [sum(split[i][j] for i in range(n)) for j in range(n)]
    flat = ", ".join(str(e) for r in split for e in r)
    tys = ", ".join(f"i32[{r},2]" for r in got) if len(set(got)) > 1 else f"i32[{got[0]},2]"
    case(
        f"uneven/all-to-all-split-{gname}-auto.fir",
        pipeline("auto"),
        [f"all_to_all with split={split} over [{', '.join(devs)}]: rank 0 receives nothing."] + peers,
        f"all_to_all_split_{g}",
        devs,
        [f"i32[{r},2]" for r in rows],
        f"  %{n}:{n} = all_to_all {shards(n)} {{axis=0, split=[{flat}]}} : {tys}",
        outs(n, n),
        topo,
    )
    default = [5 // n] * (n - 1) + [5 - (5 // n) * (n - 1)]
    got = [d * n for d in default]
    tys = ", ".join(f"f32[3,{r}]" for r in got) if len(set(got)) > 1 else f"f32[3,{got[0]}]"
    case(
        f"uneven/all-to-all-default-{gname}-auto.fir",
        pipeline("auto"),
        [f"all_to_all of 5 columns, each cut {default}, over [{', '.join(devs)}]."] + peers,
        f"all_to_all_default_{g}",
        devs,
        "f32[3,5]",
        f"  %{n}:{n} = all_to_all {shards(n)} {{axis=1}} : {tys}",
        outs(n, n),
        topo,
    )

# 8. all_to_all with exchange=packed and exchange=direct on the groups whose
# pieces stage through the CPU: packing joins a source's pieces bound for
# one staging CPU into one transfer.
for gname in ["cuda0-vulkan0", "cpu0-cuda0-vulkan0", "cuda2-vulkan2", "mix8"]:
    devs = GROUPS[gname]
    n = len(devs)
    _, topo, peers = group_options(gname)
    g = gname.replace("-", "_")
    split = [[0 if j == 0 else (i + j) % 3 for j in range(n)] for i in range(n)]
    rows = [sum(r) for r in split]
    got = [sum(split[i][j] for i in range(n)) for j in range(n)]
    flat = ", ".join(str(e) for r in split for e in r)
    tys = ", ".join(f"i32[{r},2]" for r in got) if len(set(got)) > 1 else f"i32[{got[0]},2]"
    for ex in ["direct", "packed"]:
        case(
            f"uneven/all-to-all-split-{gname}-{ex}.fir",
            f"lower-collectives{{exchange={ex}}}",
            [f"all_to_all with split={split} over [{', '.join(devs)}], exchange={ex}."] + peers,
            f"all_to_all_{ex}_{g}",
            devs,
            [f"i32[{r},2]" for r in rows],
            f"  %{n}:{n} = all_to_all {shards(n)} {{axis=0, split=[{flat}]}} : {tys}",
            outs(n, n),
            topo,
        )

# 9. all_gather joined once: on four CPUs `auto` joins at one point and the
# other CPUs share the result (one concat, not four); `reduce_at` names the
# point of a star.
case(
    "kinds/all-gather-cpu4-auto.fir",
    pipeline("auto"),
    ["all_gather along axis 0 over four CPUs: the shards meet at one CPU, are joined",
     "there once, and the other CPUs' copies share the joined buffer."],
    "all_gather_cpu4_auto",
    ["cpu:0", "cpu:1", "cpu:2", "cpu:3"],
    "f32[256,64]",
    "  %4:4 = all_gather %0, %1, %2, %3 {axis=0} : f32[1024,64]",
    outs(4, 4),
)
case(
    "options/all-gather-join-at-vulkan0.fir",
    pipeline("star", "reduce_at=vulkan:0"),
    ["all_gather joined once at vulkan:0 (reduce_at): cuda:0's shard stages through",
     "cpu:0, and the joined result goes back out to cpu:0 and, staged, to cuda:0."],
    "all_gather_join_at_vulkan0",
    ["cpu:0", "cuda:0", "vulkan:0"],
    "i32[6,4]",
    "  %3:3 = all_gather %0, %1, %2 {axis=1} : i32[6,12]",
    outs(3, 3),
)

# 10. pairwise reduce_scatter: each share folded once, side by side. On its
# own ranks (the cheapest pairwise form here), and with reduce_at naming
# where the shares of the ranks across the host/GPU line fold.
for gname in ["cpu0-cuda0-vulkan0", "cuda2-vulkan2", "mix8"]:
    devs = GROUPS[gname]
    n = len(devs)
    extra, topo, peers = group_options(gname, "pairwise")
    topo = topo and "../uneven/" + topo
    g = gname.replace("-", "_")
    case(
        f"kinds/reduce-scatter-{gname}-pairwise.fir",
        pipeline("pairwise", extra),
        ["reduce_scatter.sum along axis 0, each rank's share folded once: the cheapest",
         "pairwise form by the cost model."] + peers,
        f"reduce_scatter_{g}_pairwise",
        devs,
        f"i32[{2 * n},4]",
        f"  %{n}:{n} = reduce_scatter.sum {shards(n)} {{axis=0}} : i32[2,4]",
        outs(n, n),
        topo,
    )
for at in ["vulkan:0", "cpu:0"]:
    case(
        f"options/reduce-scatter-pairwise-at-{at.replace(':', '')}.fir",
        pipeline("pairwise", f"reduce_at={at}"),
        [f"reduce_scatter.sum, pairwise@{at}: the shares of the ranks across the",
         f"host/GPU line from {at} fold on it, the others on their own ranks."],
        f"reduce_scatter_pairwise_at_{at.replace(':', '')}",
        ["cpu:0", "cuda:0", "vulkan:0", "cpu:1"],
        "i32[8,4]",
        "  %4:4 = reduce_scatter.sum %0, %1, %2, %3 {axis=0} : i32[2,4]",
        outs(4, 4),
    )

# 11. split all_reduce: the value cut in two parts that two GPUs with no
# direct path between them fold side by side, joined once on the staging
# CPU; the cheapest fraction by the cost model. With a Mean of f16 too,
# folded wide and cast back on each GPU.
for gname in ["cuda0-vulkan0", "cpu0-cuda0-vulkan0", "cuda2-vulkan2", "mix8"]:
    devs = GROUPS[gname]
    n = len(devs)
    extra, topo, peers = group_options(gname, "split")
    case(
        f"all-reduce/{gname}-split.fir",
        pipeline("split", extra),
        [f"all_reduce.sum over [{', '.join(devs)}] with algorithm=split: the first",
         "CUDA and Vulkan pair folds the two parts; the CPUs share the joined value,",
         "a Vulkan device imports it, a CUDA device that folded a part takes the other."]
        + peers,
        f"all_reduce_{gname.replace('-', '_')}_split",
        devs,
        "f32[8]",
        f"  %{n}:{n} = all_reduce.sum {shards(n)} : f32[8]",
        outs(n, n),
        topo,
    )
case(
    "kinds/all-reduce-mean-f16-cpu0-cuda0-vulkan0-split.fir",
    pipeline("split"),
    ["all_reduce.mean of f16, split: each part summed in f32 on its GPU, divided",
     "and cast back to f16 there, then joined on cpu:0."],
    "all_reduce_mean_f16_cpu0_cuda0_vulkan0_split",
    ["cpu:0", "cuda:0", "vulkan:0"],
    "f16[5,3]",
    "  %3:3 = all_reduce.mean %0, %1, %2 : f16[5,3]",
    outs(3, 3),
)

# 12. all_gather joined at the staging CPU, each CUDA rank joining the
# shards it lacks itself (star@cpu:0{parts}): `auto`'s pick on the shipped
# PCIe workstation at 4 MiB per shard. The CPU's own shard goes straight
# up; the GPUs' shards, which have no direct path to the CUDA rank, are
# sliced out of the joined result on the host.
PCIE = "../../../../examples/topologies/pcie-cuda-vulkan.topo"
for devs in [["cuda:0", "vulkan:0", "cpu:0"], ["cuda:0", "cuda:1", "vulkan:0", "cpu:0"]]:
    n = len(devs)
    gname = "-".join(d.replace(":", "") for d in devs)
    case(
        f"kinds/all-gather-{gname}-parts.fir",
        pipeline("auto"),
        [f"all_gather of 4 MiB shards over [{', '.join(devs)}] on the PCIe workstation",
         "(examples/topologies/pcie-cuda-vulkan.topo): the shards are joined once on",
         "cpu:0, vulkan:0 imports the result, and each CUDA rank joins what it lacks."],
        f"all_gather_{gname.replace('-', '_')}_parts",
        devs,
        "f32[262144,4]",
        f"  %{n}:{n} = all_gather {shards(n)} {{axis=0}} : f32[{262144 * n},4]",
        outs(n, n),
        PCIE,
    )
