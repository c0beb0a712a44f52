/* lib/version: this build's release and commit.
 *
 * Both strings live in lib/version.o alone, the one object compiled with STALENET_VERSION and
 * STALENET_COMMIT (the Makefile rebuilds it, and only it, when the commit changes), so one
 * binary never disagrees with itself and a new commit does not rebuild the tree. */
#ifndef STALENET_VERSION_H
#define STALENET_VERSION_H

/* The release ("0.1.0") and the commit it was built from ("abc1234", or "unknown" outside a
 * git checkout). Static strings. */
const char *version_release(void);
const char *version_commit(void);

#endif
