/* Kernel backend (netem + TBF through netlink): the same fidelity suite as the nfq backend.
 * Runs where sch_netem exists: directly, or inside the netem VM (make check-kernel). */
#define SHAPER_TEST_BACKEND LINK_BACKEND_KERNEL
#define SHAPER_TEST_KERNEL 1
#include "../netns/test_linkd_fidelity.c"
