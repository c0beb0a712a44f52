/* lib/limits: the limits of a run, in one place. The scenario validator (orchestrator/scenario)
 * refuses a scenario past any of them with a FILE:LINE:COL error naming the limit, and the code
 * that would meet the limit at run time (engines, wire, shaping backends) enforces the same
 * constant, so what `stalenet check` accepts is what the testbed and the nodes run.
 *
 *   LIMITS_MAX_NODES      nodes of one run (workers + servers, or explicit nodes); also the
 *                         largest consistency.sample and consistency.fanout. The engines keep
 *                         per-node arrays and, peer to peer, one connection per other peer. What
 *                         else the testbed sizes per node holds 1024 with room: the NFQUEUE
 *                         backend shapes two directions per node (link_shaper: 4096 links, queue
 *                         numbers from 100, below 65536; linkd: 4096 queues), a switch port is
 *                         named prefix (<= 8) + "p" + index (<= 4 digits) < IFNAMSIZ, and the
 *                         validator checks that the nodes fit network.subnet.
 *   LIMITS_MAX_RATE_BPS   link rate in bit/s. The kernel backend's TBF takes the rate as a
 *                         32-bit signed byte count per second through libnl
 *                         (rtnl_qdisc_tbf_set_rate(int)), no TCA_TBF_RATE64: 2^31 - 1 bytes/s,
 *                         about 17.18 Gbit/s. The validator refuses more for either backend
 *                         (one limit), as do link_params_validate and the kernel backend
 *                         (link_kernel_tbf_sizes; it used to clamp without a word).
 *   LIMITS_MAX_BATCH      train.batch: samples in one minibatch.
 *   LIMITS_MAX_BLAS_THREADS  train.blas_threads.
 *   LIMITS_MAX_PARAMS     floats in one model: a data-plane message carries at most this many
 *                         (node/wire's WIRE_MAX_PAYLOAD_BYTES is 4 bytes each). */
#ifndef STALENET_LIMITS_H
#define STALENET_LIMITS_H

#define LIMITS_MAX_NODES 1024
#define LIMITS_MAX_RATE_BPS 17179869176ull /* 8 * (2^31 - 1) */
#define LIMITS_MAX_BATCH 65536
#define LIMITS_MAX_BLAS_THREADS 256
#define LIMITS_MAX_PARAMS (64u << 20)

#endif
