/* collectors/plot: figures of a run or a sweep, drawn by gnuplot.
 *
 * The numbers come from collectors/plot_data; this module writes them to data files in a
 * private temporary directory, writes one small gnuplot script per figure and runs gnuplot
 * (fork/exec, no shell) once per figure, producing both DIR/plots/NAME.png (pngcairo) and
 * DIR/plots/NAME.svg. Nothing read from DIR ever runs code: no string from it enters a script's
 * text except through a strict whitelist (see plot.c). Figures and what they show:
 * docs/traces.md, "Figures". */
#ifndef STALENET_PLOT_H
#define STALENET_PLOT_H

#include <stddef.h>

/* Names of the figures plot_dir can write (without extension), NULL-terminated. A figure whose
 * input files are absent in every run (say links.csv) is skipped. */
extern const char *const PLOT_FIGURES[];

/* Render every figure of run_or_sweep_dir: a run dir (holds meta.json) or a sweep dir (its
 * subdirectories holding meta.json are the runs; runs with equal sweep values are repeats of one
 * sweep point). Writes into DIR/plots/. Returns the number of figures written, or -errno with
 * a message in err (gnuplot's own stderr when it fails). The gnuplot binary is $GNUPLOT or
 * "gnuplot" on PATH. */
int plot_dir(const char *run_or_sweep_dir, char *err, size_t errlen);

/* Draw the runs of several run or sweep directories over each other into out_dir (created
 * when absent, one level; PNG and SVG): accuracy_time and steps_cdf, as plot_dir draws them,
 * each point keyed "TAG: value" (labels[i] or the run's mode; plot_data_collect_many), one
 * colour per sweep value and one dash per directory. Returns the number of figures written or
 * -errno with a message in err. */
int plot_compare(const char *const *dirs, const char *const *labels, size_t ndirs,
		 const char *out_dir, char *err, size_t errlen);

struct plot_set;

/* How point p of a set is drawn: its style's colour (8 colour-blind-safe ones), a dash pattern
 * and a point marker for the colour's repeats. The variant v = source + nsources * (style / 8)
 * picks the dash (v % PLOT_LOOK_NDASH: a directory of a comparison keeps its dash while it
 * has fewer than 8 values) and the marker (v / PLOT_LOOK_NDASH, 0: none), so two points of a
 * set of at most 32 styles and 32 sources never look alike. fill is the box fill pattern
 * (0: solid; v % 8 otherwise). Strings are constants of this module, never the set's text. */
#define PLOT_LOOK_NDASH 8
struct plot_look {
	const char *color; /* "#RRGGBB" */
	const char *dash;  /* gnuplot dash type: "1" (solid) or "(a,b,...)" */
	int point;         /* gnuplot point type, 0: a plain line */
	int fill;          /* gnuplot fill pattern for boxes, 0: solid */
};
void plot_look_of(const struct plot_set *set, size_t p, struct plot_look *out);

/* Copy src into dst (dstlen > 0) keeping only letters, digits, space and ._-+=:,/%()[] ;
 * every other byte becomes '_'. The form in which untrusted text may enter gnuplot script
 * text. Returns dst. */
char *plot_safe_text(char *dst, size_t dstlen, const char *src);

#endif
