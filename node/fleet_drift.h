/* node/fleet_drift: a device's drift schedule (fleet.drift): classes that appear in its data
 * stream at a time or after a number of its steps.
 *
 * The orchestrator resolves the scenario's entries per device and hands each node the lists of
 * every device as `fleet.drift.<index>` (docs/node-config.md): entries separated by ';', each
 * `t<seconds>:<classes>` or `s<steps>:<classes>`, classes comma-separated (0..15), e.g.
 * "t20:7,8;s900:9". A device applies its entries in list order, each once it is due and the
 * ones before it are applied.
 *
 * What an entry adds: every sample of a new class (one the share does not hold yet) at source
 * position p of the (train_limit-limited) training file with p mod N == the device's index, N
 * the number of devices; so devices given the same class get disjoint slices of it. The
 * samples are appended to the share, so the positions of the samples already there do not
 * move: the registry, which recomputes replay frames from share positions, holds the share as
 * deployed, and a replay frame carries the raw samples at positions past it (node/fleet_codec). */
#ifndef STALENET_FLEET_DRIFT_H
#define STALENET_FLEET_DRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine_work;
struct engine_conf;

#define FLEET_DRIFT_MAX 64        /* entries per device */
#define FLEET_DRIFT_CLASSES 16    /* class labels 0..15 */

struct fleet_drift_entry {
	bool by_steps;      /* due after at_steps of the device's steps, else at at_s */
	double at_s;        /* run seconds */
	int64_t at_steps;
	uint16_t classes;   /* bit c: class c */
};

struct fleet_drift {
	struct fleet_drift_entry e[FLEET_DRIFT_MAX];
	size_t n;
	size_t next;        /* entries applied so far */
};

/* Parse a schedule string (NULL or "" = none) into *out. Returns 0 or -EINVAL. */
int fleet_drift_parse(const char *s, struct fleet_drift *out);

/* The class mask of the next entry when it is due at run time now_s after steps steps, and
 * mark it applied; 0 when none is due. Call until it returns 0. */
uint16_t fleet_drift_due(struct fleet_drift *d, double now_s, int64_t steps);

/* The source positions to add for device index of ndev: labels[p] in classes and not in held,
 * p mod ndev == index, p < nlabels, ascending. *idx malloc'ed (NULL when *nidx == 0). Returns 0
 * or -ENOMEM. */
int fleet_drift_select(const uint8_t *labels, uint32_t nlabels, uint32_t index, uint32_t ndev,
		       uint16_t classes, uint16_t held, uint32_t **idx, size_t *nidx);

/* Add the samples of classes to w's share for the device c->index (c->n devices): the selection
 * above over the training file under c->data_dir, appended with engine_work_add_samples. *added
 * gets the count. Returns 0 or negative errno (logged). */
int fleet_drift_apply(struct engine_work *w, const struct engine_conf *c, uint16_t classes,
		      size_t *added);

#endif
