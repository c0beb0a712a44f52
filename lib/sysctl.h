/* lib/sysctl: read and write kernel parameters through /proc/sys.
 *
 * Keys are dotted (net.ipv4.tcp_congestion_control). Network sysctls resolve to the network
 * namespace of the thread that opens the file, so enter a namespace first (lib/netns) to
 * read or set its values. Values are single-line strings; the trailing newline is trimmed. */
#ifndef STALENET_SYSCTL_H
#define STALENET_SYSCTL_H

#include <stddef.h>

/* /proc/sys/<key with '.' -> '/'> into buf. Returns 0 or -ENAMETOOLONG / -EINVAL. */
int sysctl_path(const char *key, char *buf, size_t len);

/* Read key into buf (NUL-terminated, newline trimmed, tabs turned into spaces).
 * Returns 0 or -errno (-ENOENT when this kernel or namespace has no such key). */
int sysctl_read(const char *key, char *buf, size_t len);

/* Write value to key. Returns 0 or -errno. */
int sysctl_write(const char *key, const char *value);

#endif
