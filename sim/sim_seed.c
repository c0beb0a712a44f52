/* sim/sim_seed: see sim_seed.h. */
#include "sim/sim_seed.h"

uint64_t sim_seed_own(uint64_t run_seed, uint32_t n)
{
	uint64_t z;

	if (!n)
		return run_seed;
	/* splitmix64 of (run_seed, n): other seeds for every n, apart from run_seed's */
	z = run_seed + 0x9e3779b97f4a7c15ull * ((uint64_t)n + 0x5eedull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
