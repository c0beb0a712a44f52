/* node/barrier: the consistency models as pure decision functions.
 *
 * Shared by the node engines and the simulator, so nothing here does I/O, reads a clock or
 * touches ZeroMQ; all randomness comes from a caller-owned RNG state (barrier_rng_*), so a run
 * is reproducible from its seed.
 *
 * Semantics. Worker i has clock c_i = number of steps it has completed. Before starting step
 * c+1, a worker with clock c may proceed when
 *   BSP           every live worker has clock >= c
 *   SSP(s)        every live worker has clock >= c - s
 *   ASP           always
 *   pBSP(beta)    beta live workers, drawn uniformly without replacement and excluding the
 *                 worker itself, all have clock >= c
 *   pSSP(beta,s)  the drawn workers all have clock >= c - s
 * A sample is drawn for every barrier crossing or, on the parameter server, for every check of
 * a held request (enum barrier_draw below). beta = 0 is exactly ASP; beta >= the
 * number of other live workers is exactly BSP/SSP (the sample is then everybody). Dead workers
 * (crashed, left) are excluded everywhere: from "every worker" and from the sampling pool.
 *
 * Backup workers (Chen et al., "Revisiting distributed synchronous SGD", 2016): a synchronous
 * round closes on the first N_live - b updates computed on the round's model; updates that
 * arrive after the close are dropped and counted (struct barrier_round). */
#ifndef STALENET_BARRIER_H
#define STALENET_BARRIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum barrier_kind { BARRIER_BSP = 0, BARRIER_SSP, BARRIER_ASP, BARRIER_PBSP, BARRIER_PSSP };

/* Parameters of one consistency model. staleness is used by SSP/pSSP (ignored otherwise),
 * sample (beta) by pBSP/pSSP, backup (b) by the synchronous round of BSP. */
struct barrier_params {
	enum barrier_kind kind;
	int64_t staleness;
	uint32_t sample;
	uint32_t backup;
};

/* When a held pBSP/pSSP request draws its sample (consistency.draw):
 *   CROSSING  once per barrier crossing; the request is held until every drawn worker has
 *             reached the threshold (the rule above)
 *   CHECK     afresh every time the request is judged again (whenever some clock moves); it
 *             goes on as soon as one draw finds all its workers at or above the threshold
 *             (the PSP chapter's rule: its barrier predicate samples on every call)
 * Both give ASP at beta = 0 and BSP/SSP at beta >= the live others. */
enum barrier_draw { BARRIER_DRAW_CROSSING = 0, BARRIER_DRAW_CHECK };

/* "crossing"|"check" -> draw. Returns 0 or -EINVAL. */
int barrier_draw_parse(const char *name, enum barrier_draw *out);
/* The name of draw ("?" for an invalid value). */
const char *barrier_draw_name(enum barrier_draw draw);

/* "bsp"|"ssp"|"asp"|"pbsp"|"pssp" -> kind. Returns 0 or -EINVAL. */
int barrier_kind_parse(const char *name, enum barrier_kind *out);
/* The lower-case name of kind ("?" for an invalid value). */
const char *barrier_kind_name(enum barrier_kind kind);

/* True for the probabilistic kinds (pBSP, pSSP), which need a sample per crossing. */
bool barrier_is_sampled(enum barrier_kind kind);

/* Lowest clock a checked worker may have for a worker at clock c to proceed:
 * c for BSP/pBSP, c - staleness for SSP/pSSP, INT64_MIN for ASP. */
int64_t barrier_threshold(const struct barrier_params *p, int64_t c);

/* Deterministic RNG (splitmix64). *state is the whole state; seed it with any value. */
uint64_t barrier_rng_next(uint64_t *state);
/* Uniform integer in [0, bound) without modulo bias; bound > 0. */
uint64_t barrier_rng_below(uint64_t *state, uint64_t bound);

/* Draw min(beta, live others) distinct indices uniformly without replacement from the live
 * workers other than self (alive == NULL means all n are live). Writes them to out (capacity
 * >= n) in draw order and returns how many were drawn. */
size_t barrier_sample(uint64_t *rng, size_t n, size_t self, const bool *alive, size_t beta,
		      size_t *out);

/* May worker self, at clock c, start step c+1? clocks[n] and alive[n] (NULL = all live) describe
 * every worker. For sampled kinds, sample[nsample] are the worker indices to check (from
 * barrier_sample); for the other kinds sample is ignored. Dead workers are never checked. */
bool barrier_may_proceed(const struct barrier_params *p, const int64_t *clocks, const bool *alive,
			 size_t n, size_t self, int64_t c, const size_t *sample, size_t nsample);

/* The whole decision for one crossing: draws a fresh sample from rng when the kind needs one,
 * then evaluates barrier_may_proceed. scratch needs room for n indices. */
bool barrier_check(const struct barrier_params *p, const int64_t *clocks, const bool *alive,
		   size_t n, size_t self, int64_t c, uint64_t *rng, size_t *scratch);

/* --- synchronous rounds with backup workers ------------------------------------------------ */

/* One synchronous round: collects the updates computed on model version `version`; closes on
 * `need` = max(1, live - backup) of them. Plain struct; fields readable by the caller. */
struct barrier_round {
	int64_t version;   /* model version whose updates this round collects */
	uint32_t live;     /* live workers */
	uint32_t backup;   /* b */
	uint32_t need;     /* updates that close the round */
	uint32_t got;      /* updates accepted so far */
	uint64_t late;     /* updates dropped because their round had closed (all rounds) */
	uint64_t invalid;  /* updates for a version that does not exist yet (all rounds) */
};

enum barrier_offer {
	BARRIER_ACCEPT = 0,   /* counted; the round stays open */
	BARRIER_CLOSE,        /* counted, and this update closes the round: apply, then advance */
	BARRIER_LATE,         /* computed on an older version: dropped (counted in late) */
	BARRIER_INVALID,      /* computed on a version newer than the round: dropped (invalid) */
};

/* Start collecting for version with `live` workers, `backup` of which may be left out. */
void barrier_round_init(struct barrier_round *r, int64_t version, uint32_t live, uint32_t backup);

/* Offer one update computed on version v. */
enum barrier_offer barrier_round_offer(struct barrier_round *r, int64_t v);

/* After a close: open the next round (version + 1), keeping the counters. */
void barrier_round_advance(struct barrier_round *r);

/* The number of live workers changed (death, restart). Returns true when the round, still
 * open, has now reached its (smaller) need and must close; the caller applies and advances. */
bool barrier_round_set_live(struct barrier_round *r, uint32_t live);

#endif
