#!/usr/bin/env python3
"""The numpy host bound of issue 37: what a plain numpy loop takes to
all-reduce N f32 shards of one size in one process.

The work is what any in-process all_reduce over N host arenas must do when
each rank gets a buffer of its own: one fold of the N shards (N-1 adds,
the first writing a fresh result) and N-1 copies of the result. It is
timed on 1 thread and on 2 threads (each thread takes one half of every
array; numpy releases the GIL inside add and copyto), and the faster of
the two is the bound, as issue 37's table counts it.

Prints CSV: n, size (bytes per rank), threads, the median and the best
time in microseconds, and algbw (bytes per rank over the median time, in
GB/s), one row per thread count and a `best` row per (n, size).

    python3 scripts/numpy-bound.py --ranks 2,4,8 --sizes 256K,4M,16M --iters 20

Needs numpy (`pip install numpy`); nothing else. Bytes per rank must be a
multiple of 4.
"""

import argparse
import statistics
import sys
import threading
import time

try:
    import numpy as np
except ImportError:
    sys.exit("numpy-bound: numpy is not installed; run `pip install numpy`")


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    if t and t[-1] in units:
        return int(t[:-1]) * units[t[-1]]
    return int(t)


def step(shards, results, lo, hi):
    """Fold shards[lo:hi] into results[0][lo:hi], then copy it to the rest."""
    r = results[0][lo:hi]
    np.add(shards[0][lo:hi], shards[1][lo:hi], out=r)
    for s in shards[2:]:
        np.add(r, s[lo:hi], out=r)
    for out in results[1:]:
        np.copyto(out[lo:hi], r)


def run_once(shards, results, threads):
    n = shards[0].shape[0]
    if threads == 1:
        t0 = time.perf_counter()
        step(shards, results, 0, n)
        return time.perf_counter() - t0
    half = n // 2
    t0 = time.perf_counter()
    worker = threading.Thread(target=step, args=(shards, results, half, n))
    worker.start()
    step(shards, results, 0, half)
    worker.join()
    return time.perf_counter() - t0


def measure(ranks, size, threads, iters, warmup):
    elems = size // 4
    rng = np.random.default_rng(ranks * 1000 + elems)
    shards = [rng.standard_normal(elems, dtype=np.float32) for _ in range(ranks)]
    results = [np.empty(elems, dtype=np.float32) for _ in range(ranks)]
    # At least `warmup` runs and at least half a second, so first touches
    # and a cold cache are no part of the bound.
    start = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - start < 0.5:
        run_once(shards, results, threads)
        done += 1
    times = [run_once(shards, results, threads) for _ in range(iters)]
    want = np.sum(np.stack(shards), axis=0, dtype=np.float32)
    if not np.allclose(results[-1], want, rtol=1e-5, atol=1e-5):
        sys.exit(f"numpy-bound: wrong sum at n={ranks} size={size}")
    return statistics.median(times), min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="2,4,8", help="comma list of N")
    p.add_argument("--sizes", default="256K,4M,16M", help="bytes per rank, comma list")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    print("n,size,threads,median_us,best_us,algbw_gbps")
    for ranks in [int(x) for x in a.ranks.split(",")]:
        if ranks < 2:
            sys.exit("numpy-bound: --ranks needs N >= 2")
        for size in [parse_size(x) for x in a.sizes.split(",")]:
            if size <= 0 or size % 4:
                sys.exit(f"numpy-bound: size {size} is not a positive multiple of 4 bytes")
            rows = []
            for threads in (1, 2):
                med, best = measure(ranks, size, threads, a.iters, a.warmup)
                rows.append((med, best, threads))
                print(f"{ranks},{size},{threads},{med*1e6:.1f},{best*1e6:.1f},{size/med/1e9:.4f}")
            med, best, threads = min(rows)
            print(f"{ranks},{size},best({threads}),{med*1e6:.1f},{best*1e6:.1f},{size/med/1e9:.4f}")


if __name__ == "__main__":
    main()
