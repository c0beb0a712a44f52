/* orchestrator/units: the quantities of the scenario language, written as tc writes them.
 *
 * Parsing is exact decimal arithmetic (no binary floating point on the way), so "12.3456%" is
 * exactly 123456 ppm and "1.5mbit" exactly 1500000 bit/s; a value that cannot be represented
 * exactly in the target unit is rounded to nearest. Formatting picks the largest unit that
 * represents the value exactly, so parse(format(x)) == x for every x.
 *
 *   time         us, ms, s, m (minutes); a unit is required except for 0
 *   probability  a fraction 0..1 ("0.05") or a percentage "5%"
 *   rate         bit kbit mbit gbit tbit (x1000), kibit mibit gibit (x1024): bits per second;
 *                bps kbps mbps gbps: BYTES per second (as tc); a unit is required except for 0
 *   count        a plain integer with an optional k m g suffix (x1000) */
#ifndef STALENET_UNITS_H
#define STALENET_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Each parser returns 0, or -EINVAL with a short reason in *why (static string, may be NULL),
 * or -ERANGE when the value overflows the type. */
int units_parse_time_us(const char *s, uint64_t *us, const char **why);
int units_parse_prob_ppm(const char *s, uint32_t *ppm, const char **why);
int units_parse_rate_bps(const char *s, uint64_t *bps, const char **why);
int units_parse_count(const char *s, uint64_t *count, const char **why);

/* Exact decimal of s as value = mant / 10^scale (digits, optional '.', digits; no sign). Returns
 * the number of characters consumed (> 0) or -EINVAL / -ERANGE. */
int units_parse_decimal(const char *s, uint64_t *mant, unsigned *scale);

/* Format into buf (as snprintf: returns the length needed). */
int units_format_time(uint64_t us, char *buf, size_t len);
int units_format_prob(uint32_t ppm, char *buf, size_t len);     /* "1%", "0.0001%", "100%" */
int units_format_rate(uint64_t bps, char *buf, size_t len);     /* "100mbit", "1500kbit" */

#endif
