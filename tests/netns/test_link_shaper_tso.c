/* The nfq backend's setting of the sending node's TCP (netem/link_shaper.h): shaping a link's up
 * direction sets net.ipv4.tcp_min_tso_segs to LINK_SHAPER_NFQ_MIN_TSO_SEGS inside the node's
 * namespace, and nowhere else (not in the switch's namespace, not on the host, not for a
 * direction the node only receives on); the setting goes with the namespace.
 * Fixture: namespaces "node" and "switch" joined by one veth pair, linkd in a thread of this
 * process. Skips without root; fails instead when STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "netem/linkd.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"

static char ns_node[64], ns_sw[64], if_node[16], if_sw[16], ctl[128], tmpdir[64];
static struct linkd *lkd;
static pthread_t lkd_thread;
static bool lkd_running;
static struct link_shaper *shaper;
static struct link_endpoint ep;

static void *linkd_main(void *arg)
{
	linkd_run(arg);
	return NULL;
}

static void setup(void)
{
	log_init("test", LOG_WARN);
	support_require_root();
	int subnet = (getpid() % 200) + 1;
	snprintf(ns_node, sizeof ns_node, "snt%d-node", getpid());
	snprintf(ns_sw, sizeof ns_sw, "snt%d-sw", getpid());
	snprintf(if_node, sizeof if_node, "st%dn", getpid() % 100000);
	snprintf(if_sw, sizeof if_sw, "st%ds", getpid() % 100000);
	if (support_sh("ip netns add %s && ip netns add %s", ns_node, ns_sw) != 0 ||
	    support_sh("ip link add %s netns %s type veth peer %s netns %s", if_node, ns_node, if_sw, ns_sw) != 0 ||
	    support_sh("ip -n %s addr add 198.18.%d.1/24 dev %s && ip -n %s addr add 198.18.%d.2/24 dev %s",
		       ns_node, subnet, if_node, ns_sw, subnet, if_sw) != 0 ||
	    support_sh("ip -n %s link set %s up && ip -n %s link set %s up", ns_node, if_node, ns_sw, if_sw) != 0) {
		support_skip_or_fail("cannot create namespaces / veth");
		return;
	}
	support_tmpdir(tmpdir, sizeof tmpdir, "shapertso");
	snprintf(ctl, sizeof ctl, "%s/linkd.sock", tmpdir);
	lkd = linkd_new(ctl);
	cr_assert_not_null(lkd);
	linkd_set_rt_priority(lkd, 0);
	cr_assert_eq(pthread_create(&lkd_thread, NULL, linkd_main, lkd), 0);
	lkd_running = true;
	struct link_shaper_opts o = { .backend = LINK_BACKEND_NFQ, .linkd_ctl = ctl };
	shaper = link_shaper_new(&o);
	if (!shaper)
		support_skip_or_fail("no nfq backend here");
	ep = (struct link_endpoint){ ns_node, if_node, ns_sw, if_sw };
}

static void teardown(void)
{
	if (shaper) {
		link_shaper_remove(shaper, &ep, LINK_DIR_UP);
		link_shaper_remove(shaper, &ep, LINK_DIR_DOWN);
		link_shaper_destroy(&shaper);
	}
	if (lkd_running) {
		linkd_stop(lkd);
		pthread_join(lkd_thread, NULL);
		lkd_running = false;
	}
	if (lkd)
		linkd_destroy(&lkd);
	if (ns_node[0])
		support_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_node, ns_sw);
	if (tmpdir[0])
		support_rm_rf(tmpdir);
}

TestSuite(link_shaper_tso, .init = setup, .fini = teardown, .timeout = 30);

static int read_sysctl(void *arg)
{
	char buf[32] = "";
	int fd = open("/proc/sys/net/ipv4/tcp_min_tso_segs", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	*(int *)arg = atoi(buf);
	return 0;
}

/* net.ipv4.tcp_min_tso_segs in namespace ns ("" = the host's). */
static int min_tso_segs(const char *ns)
{
	int v = -1;
	cr_assert_eq(netns_call(ns, read_sysctl, &v), 0, "read tcp_min_tso_segs in '%s'", ns);
	return v;
}

static const struct link_params five_ms = { .delay_us = 5000, .limit_pkts = 1000 };

Test(link_shaper_tso, up_sets_the_node_only_and_goes_with_the_namespace)
{
	int host = min_tso_segs(""), sw = min_tso_segs(ns_sw), node = min_tso_segs(ns_node);

	cr_assert_neq(node, LINK_SHAPER_NFQ_MIN_TSO_SEGS, "a fresh namespace has the kernel's default (%d)", node);
	/* receiving only: the node's TCP is not touched */
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_DOWN, &five_ms), 0);
	cr_assert_eq(min_tso_segs(ns_node), node);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &five_ms), 0);
	cr_assert_eq(min_tso_segs(ns_node), LINK_SHAPER_NFQ_MIN_TSO_SEGS);
	cr_assert_eq(min_tso_segs(ns_sw), sw, "the switch's namespace keeps its value");
	cr_assert_eq(min_tso_segs(""), host, "the host keeps its value");
	/* changing the direction in place keeps it */
	struct link_params ten_ms = five_ms;
	ten_ms.delay_us = 10000;
	cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, &ten_ms), 0);
	cr_assert_eq(min_tso_segs(ns_node), LINK_SHAPER_NFQ_MIN_TSO_SEGS);
	/* the setting lives in the namespace: once its name is gone nothing is left to undo */
	cr_assert_eq(link_shaper_remove(shaper, &ep, LINK_DIR_UP), 0);
	cr_assert_eq(link_shaper_remove(shaper, &ep, LINK_DIR_DOWN), 0);
	cr_assert_eq(support_sh("ip netns del %s", ns_node), 0);
	cr_assert(!netns_exists(ns_node));
	cr_assert_eq(min_tso_segs(""), host, "the host keeps its value after teardown");
}
