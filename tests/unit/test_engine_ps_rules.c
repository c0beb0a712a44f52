/* Unit tests for the parameter server's pure rules (node/engine_ps): staleness weighting
 * (consistency.weighting) against its formulas, and the update rule from combine/local_steps. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "node/engine_ps.h"

Test(engine_ps_rules, weighting_parse)
{
	enum engine_ps_weighting w = ENGINE_PS_WEIGHT_EXP;

	cr_assert_eq(engine_ps_weighting_parse(NULL, &w), 0);
	cr_assert_eq(w, ENGINE_PS_WEIGHT_NONE);
	cr_assert_eq(engine_ps_weighting_parse("inverse", &w), 0);
	cr_assert_eq(w, ENGINE_PS_WEIGHT_INVERSE);
	cr_assert_eq(engine_ps_weighting_parse("exp", &w), 0);
	cr_assert_eq(w, ENGINE_PS_WEIGHT_EXP);
	cr_assert_eq(engine_ps_weighting_parse("none", &w), 0);
	cr_assert_eq(w, ENGINE_PS_WEIGHT_NONE);
	cr_assert_eq(engine_ps_weighting_parse("linear", &w), -EINVAL);
}

/* An update s versions stale is scaled by 1, 1/(1+s) or e^-s; a fresh one is never scaled, and
 * the scale only shrinks as staleness grows. */
Test(engine_ps_rules, weighting_values)
{
	for (int64_t s = 0; s <= 50; s++) {
		cr_assert_float_eq(engine_ps_weight(ENGINE_PS_WEIGHT_NONE, s), 1.0, 1e-15);
		cr_assert_float_eq(engine_ps_weight(ENGINE_PS_WEIGHT_INVERSE, s), 1.0 / (1.0 + (double)s), 1e-15);
		cr_assert_float_eq(engine_ps_weight(ENGINE_PS_WEIGHT_EXP, s), exp(-(double)s), 1e-15);
		if (s > 0) {
			cr_assert_lt(engine_ps_weight(ENGINE_PS_WEIGHT_INVERSE, s),
				     engine_ps_weight(ENGINE_PS_WEIGHT_INVERSE, s - 1));
			cr_assert_lt(engine_ps_weight(ENGINE_PS_WEIGHT_EXP, s), engine_ps_weight(ENGINE_PS_WEIGHT_EXP, s - 1));
		}
	}
	/* a negative staleness (dropped updates are never weighted) counts as fresh */
	cr_assert_float_eq(engine_ps_weight(ENGINE_PS_WEIGHT_EXP, -3), 1.0, 1e-15);
}

Test(engine_ps_rules, update_rule)
{
	bool avg = true;

	cr_assert_eq(engine_ps_mode_parse(NULL, 1, &avg), 0);
	cr_assert_not(avg, "H = 1 without combine pushes gradients");
	cr_assert_eq(engine_ps_mode_parse("none", 10, &avg), 0);
	cr_assert(avg, "H > 1 without combine averages models");
	cr_assert_eq(engine_ps_mode_parse("average", 1, &avg), 0);
	cr_assert(avg);
	cr_assert_eq(engine_ps_mode_parse("ensemble", 1, &avg), -EINVAL);
	cr_assert_eq(engine_ps_mode_parse("none", 0, &avg), -EINVAL);
}
