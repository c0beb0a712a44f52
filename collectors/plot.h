/* collectors/plot: figures of a run or a sweep, drawn by gnuplot.
 *
 * All aggregation (across repeats, histograms, smoothing) happens here in C and is written to
 * temporary .dat files; each figure then gets one small gnuplot script, run by fork/exec (no
 * shell) once, producing both DIR/plots/NAME.png (pngcairo) and DIR/plots/NAME.svg. Figures
 * and what they show: docs/traces.md, "Figures". */
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

#endif
