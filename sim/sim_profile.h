/* sim/sim_profile: step-time and message-time distributions fitted to an emulated run, for
 * `stalenet calibrate` (which writes them) and `simulation.profile` (which the simulator draws
 * from instead of its own step and link models).
 *
 * From every worker trace nodes/<worker>.csv of an emulated run: the compute time of each step
 * (compute_s: the gradient plus the straggler's stretch) and the transfer time of each step
 * after the first (t_s - previous t_s - compute_s - wait_s: one request/reply round trip with the
 * update and the model, and any pause), each kept as SIM_PROFILE_Q quantiles (0%, 5%, ..., 100%),
 * per worker where its times differ from the others' and pooled over all workers ("all"). A
 * draw is the inverse of the piecewise-linear
 * CDF through the quantiles. The file is the flat `key = value` text of lib/kv:
 *   profile.source = RUN_DIR            profile.workers = 8
 *   worker3.compute_s = q0 q5 ... q100 [mean of the samples >= q95]   (seconds)
 *   all.compute_s = ...                 all.transfer_s = ...
 *   all.base_s = ...                    profile.delays_replayed = 8
 * base_s is the compute time without the straggler's delay draws: the fit rebuilds a worker's
 * node/straggler model from the run's nodes/<worker>.conf (seed, index, distribution), replays
 * its draws step by step and keeps compute_s minus the draw, where every step's compute time
 * holds its draw (the trace is that stream's). A simulation with base_s draws the base and adds
 * the very delays the emulated worker drew (same seed: the calibrated run carries its emulated
 * run's), so its workers follow the emulated workers' own delay sequences.
 *
 *   all.transfer_warmup = f0 f1 ... f6  (optional, below)
 *
 * The warm-up: the first steps of an emulated run move their messages faster or slower than
 * the run's steady state (a fresh TCP connection starts with its initial window and no loss
 * history; the join's exchange is part of step 1's time). f_b is the mean transfer time, over
 * every worker, of the steps k with floor(log2 k) = b (step 1; 2-3; 4-7; ...; 32-63; 64 and
 * later in f6) divided by the mean of every step after the first. A simulation scales each
 * transfer draw of step k by f_b (sim_profile_warmup_factor), so the early steps take the
 * times the emulated ones took while the run as a whole keeps its mean.
 *
 *   all.transfer_ac1 = r  (optional, |r| <= SIM_PROFILE_AC_MAX)
 *
 * Successive steps of one emulated worker are not independent: a lossy connection stays slow
 * for a few steps (its window collapsed, its retransmission timer backed off), and the
 * transfer times of straggler.yaml's workers have a lag-1 autocorrelation of about 0.5. r is it,
 * pooled over the workers (each about its own mean). A simulation draws a worker's round trips
 * through a Gaussian AR(1) with coefficient r (z_k = r z_k-1 + sqrt(1 - r^2) e_k, u_k = Phi(z_k)),
 * so each draw keeps the fitted distribution and successive ones keep the correlation: the
 * workers' clocks drift apart as far as the emulated ones do.
 *
 *   host.runq_wait = t1 f1 t2 f2 ...  (optional: seconds, fractions in [0, 1])
 *
 * The emulated host's load, as the run's progress.csv recorded it (`runq_wait_frac`: the share
 * of their time the nodes were runnable but waited for a core, sampled once a second): over
 * (t_{i-1}, t_i] (t_0 = 0) the nodes waited f_i of the time, after the last t_n not at all. A
 * saturated host stalls every node at once: the link emulator, the server and the workers all
 * wait for a core, so every message in flight is late together. Fitted as independent draws per
 * worker, those stalls would put each worker's slow round trips at other times than the
 * others' (the others stepping on meanwhile: more staleness, and slower BSP rounds, than the
 * emulated run had). So the fit takes them out: a step's transfer time is scaled to the
 * host's availability a = 1 - f over the step (sim_profile_host_work), and the tables,
 * warm-up and autocorrelation describe the messages of a quiet host; a simulation stretches
 * every calibrated message by the same timeline (sim_profile_host_wall), so the emulated run's
 * stalls come back at their times, for every worker at once. a is never taken below
 * SIM_PROFILE_AVAIL_MIN. */
#ifndef STALENET_SIM_PROFILE_H
#define STALENET_SIM_PROFILE_H

#include <stddef.h>
#include <stdio.h>

#define SIM_PROFILE_Q 21
/* A worker gets its own table only when its times differ from the other workers' (two-sample
 * Kolmogorov-Smirnov test at this level); otherwise it draws from the pooled "all", whose
 * hundreds of samples carry the tail that a worker's few dozen cut short (the slowest of N
 * workers, which sets a BSP round, lives in that tail). */
#define SIM_PROFILE_KS_ALPHA 0.001
/* Warm-up bins: steps 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64 and later. */
#define SIM_PROFILE_WARM 7
/* The largest |all.transfer_ac1| taken. */
#define SIM_PROFILE_AC_MAX 0.95

struct sim_profile;

/* Fit a profile to the worker traces of run_dir and write it to out (kv text). Returns the
 * number of workers fitted, or -errno with err filled ("path: what"; -ENOENT: no worker trace
 * with two rows). */
int sim_profile_fit(const char *run_dir, FILE *out, char *err, size_t errlen);

/* Read a profile file (everything in it is checked: SIM_PROFILE_Q finite, non-negative,
 * non-decreasing numbers per key). NULL with err filled. */
struct sim_profile *sim_profile_load(const char *path, char *err, size_t errlen);
/* The same from the text buf[0..len) (name for messages). */
struct sim_profile *sim_profile_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen);
void sim_profile_destroy(struct sim_profile **p);

/* The quantile table of worker `name` (its own, else the pooled "all"), or NULL when the
 * profile has neither: SIM_PROFILE_Q quantiles, then the mean of the top 5% (NAN when the file
 * gives none). Owned by the profile. */
const double *sim_profile_compute(const struct sim_profile *p, const char *name);
const double *sim_profile_transfer(const struct sim_profile *p, const char *name);
/* The same for the base compute time (compute_s less the replayed delay draws), or NULL when
 * the profile has no base_s for name nor "all" (an older profile, or no draws replayed). */
const double *sim_profile_base(const struct sim_profile *p, const char *name);

/* The warm-up factors (SIM_PROFILE_WARM of them), or NULL when the profile has none (then
 * every factor is 1). Owned by the profile. */
const double *sim_profile_warmup(const struct sim_profile *p);
/* all.transfer_ac1, 0 when the profile has none. */
double sim_profile_transfer_ac1(const struct sim_profile *p);

/* The host's availability is never taken below this (a sample of f = 1 would stop time). */
#define SIM_PROFILE_AVAIL_MIN 0.05

/* host.runq_wait's timeline: the wall time, seconds, that x_s seconds of work begun at t_s take
 * on the emulated host (the availability integrated from t_s reaches x_s); x_s when the profile
 * has no timeline. p may be NULL (no timeline). */
double sim_profile_host_wall(const struct sim_profile *p, double t_s, double x_s);
/* The inverse: the work, seconds, the host allowed in the wall interval [t0_s, t1_s]. */
double sim_profile_host_work(const struct sim_profile *p, double t0_s, double t1_s);

/* The bin of step k (1-based; 0 is taken as 1): floor(log2 k), at most SIM_PROFILE_WARM - 1. */
int sim_profile_warm_bin(unsigned long long k);

/* Inverse CDF of a quantile table at u in [0, 1), seconds: linear between quantiles, and in
 * the top 5% shaped to the table's tail mean when it has one. */
double sim_profile_draw(const double *q, double u);

#endif
