#!/usr/bin/env python3
# An independent check of the PSP experiment (docs/simulation.md), outside stalenet: n workers
# with i.i.d. exponential step times and no network, a barrier judged whenever any clock
# changes, under two pBSP/pSSP rules:
#   fixed     the crossing's beta workers are drawn once; the worker waits until all of them
#             have reached the threshold (node/core_ps with consistency.draw: crossing)
#   resample  every check draws beta workers afresh; the worker goes on as soon as one draw
#             finds all of them at or above the threshold (consistency.draw: check, the
#             default)
# beta = n - 1 with the fixed rule is BSP (s = 0) or SSP(s).
#   python3 scripts/psp-barrier-model.py 1 10 64        # final steps min / median / max
import heapq
import random
import sys


def run(n, beta, s, T=200.0, mean=0.5, seed=1, resample=True):
    rnd = random.Random(seed)
    clock = [0] * n
    ev = []
    waiting = set()
    samples = {}

    def ok(w):
        c = clock[w]
        if beta == 0:
            return True
        if not resample and w in samples:
            smp = samples[w]
        else:
            others = [j for j in range(n) if j != w]
            smp = rnd.sample(others, beta) if beta < n - 1 else others
            samples[w] = smp
        return all(clock[j] >= c - s for j in smp)

    for w in range(n):
        heapq.heappush(ev, (rnd.expovariate(1 / mean), w))
    while ev:
        t, w = heapq.heappop(ev)
        if t > T:
            break
        clock[w] += 1
        samples.pop(w, None)
        waiting.add(w)
        for u in list(waiting):
            if ok(u):
                waiting.discard(u)
                samples.pop(u, None)
                heapq.heappush(ev, (t + rnd.expovariate(1 / mean), u))
    cs = sorted(clock)
    return cs[0], cs[n // 2], cs[-1]


if __name__ == "__main__":
    for beta in [int(x) for x in sys.argv[1:]] or [1, 10, 64]:
        print(beta, "resample", run(200, beta, 0), "fixed", run(200, beta, 0, resample=False))
