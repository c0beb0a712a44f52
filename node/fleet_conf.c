/* node/fleet_conf: see fleet_conf.h. */
#include "node/fleet_conf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/fleet_store.h"

double fleet_conf_run_s(const struct engine_conf *c)
{
	return (double)(clock_now_ns() - c->origin_ns) / 1e9;
}

/* fleet.registry central | peers, and fleet.peers 1..N-1 (peers only). */
static int conf_read_registry(const struct kv *cfg, struct fleet_conf *fc)
{
	const char *mode = kv_get(cfg, "fleet.registry");

	fc->peers = mode && !strcmp(mode, "peers");
	if (mode && !fc->peers && strcmp(mode, "central")) {
		log_error("engine_fleet: fleet.registry '%s' (expected central or peers)", mode);
		return -EINVAL;
	}
	if (fc->peers && (fc->ec.n < 2 || fc->npeers < 1 || fc->npeers > (int64_t)fc->ec.n - 1)) {
		log_error("engine_fleet: fleet.peers %lld (expected 1..%u)", (long long)fc->npeers,
			  fc->ec.n > 1 ? fc->ec.n - 1 : 0);
		return -EINVAL;
	}
	return 0;
}

int fleet_conf_read(const struct kv *cfg, struct fleet_conf *fc)
{
	const char *saddrs = kv_get(cfg, "servers.addrs"), *strat = kv_get(cfg, "fleet.strategy");
	int64_t port = 7000;
	size_t alen;
	int rc;

	memset(fc, 0, sizeof *fc);
	if ((rc = engine_conf_read(cfg, &fc->ec)))
		return rc;
	rc = kv_get_i64(cfg, "fleet.sync_steps", 20, &fc->sync_steps);
	rc = rc ? rc : kv_get_double(cfg, "fleet.sync_s", 0, &fc->sync_s);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.snapshot_every", 10, &fc->snapshot_every);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.sparse_k", 0, &fc->sparse_k);
	rc = rc ? rc : kv_get_double(cfg, "fleet.sparse_fraction", 0.01, &fc->sparse_fraction);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.base_steps", 200, &fc->base_steps);
	rc = rc ? rc : kv_get_i64(cfg, "port.data", 7000, &port);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.peers", 2, &fc->npeers);
	if (rc)
		goto fail;
	if ((rc = conf_read_registry(cfg, fc)) < 0)
		goto fail;
	if (strat && !strcmp(strat, "auto")) {
		fc->auto_choose = true;
		fc->strategy = FLEET_REPLAY;
	} else if (fleet_strategy_parse(strat ? strat : "delta", &fc->strategy) < 0) {
		log_error("engine_fleet: fleet.strategy '%s' (expected full, delta, sparse, replay or auto)",
			  strat);
		goto fail;
	}
	if ((fc->sync_steps <= 0 && !(fc->sync_s > 0)) || fc->snapshot_every < 1 ||
	    fc->snapshot_every > FLEET_STORE_MAX_CHAIN || fc->sparse_k < 0 ||
	    !(fc->sparse_fraction >= 0 && fc->sparse_fraction <= 1)) {
		log_error("engine_fleet: bad fleet.sync_steps/sync_s/snapshot_every/sparse_k");
		goto fail;
	}
	fc->base = kv_get(cfg, "fleet.base");
	fc->base_file = kv_get(cfg, "fleet.base_file");
	if (!fc->base)
		fc->base = "init";
	alen = saddrs ? strcspn(saddrs, ",") : 0;
	if (!alen || alen >= 64) {
		log_error("engine_fleet: servers.addrs (the registry's address) is not set");
		goto fail;
	}
	snprintf(fc->registry_ep, sizeof fc->registry_ep, "tcp://%.*s:%d", (int)alen, saddrs, (int)port);
	return 0;
fail:
	engine_conf_free(&fc->ec);
	return -EINVAL;
}

bool fleet_conf_holds_for(uint32_t n, uint32_t k, uint32_t holder, uint32_t origin)
{
	uint32_t d = (holder + n - origin) % n;

	return d >= 1 && d <= k;
}
