/* sim/sim_seed: the seed of the simulator's own draws.
 *
 * A simulation draws two kinds of random numbers. Those the emulated run draws too (the
 * initial model, the data split, every worker's minibatches, a straggler's delay per step)
 * come from the run's seed through the very streams the emulated nodes use, so a simulation
 * and its emulated run share them. The others exist only in the simulator (the links' jitter
 * and loss, a calibration profile's step and transfer times): they come from the seed
 * returned here, the run's seed unless `simulation.seed` (N >= 1) asks for the N-th other
 * one. Averaging simulations over several N separates the simulator's own noise from a
 * difference between the model and the emulated run. */
#ifndef STALENET_SIM_SEED_H
#define STALENET_SIM_SEED_H

#include <stdint.h>

/* The seed of the simulator's own draws for a run of seed run_seed with simulation.seed n
 * (0: run_seed itself, as before the key existed). */
uint64_t sim_seed_own(uint64_t run_seed, uint32_t n);

#endif
