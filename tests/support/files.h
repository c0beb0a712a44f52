/* Files for tests: a private temporary directory, removing a tree, reading and writing a
 * whole file. The asserting helpers fail the current test (Criterion) when the file system
 * refuses; the others return errors, so they also serve forked children and teardowns. */
#ifndef STALENET_TESTS_SUPPORT_FILES_H
#define STALENET_TESTS_SUPPORT_FILES_H

#include <stdbool.h>
#include <stddef.h>

struct table;

/* Create a fresh directory /tmp/stalenet-<tag>-XXXXXX into buf (len bytes) and return buf.
 * Fails the test when it cannot. Removed when the test's process exits (support_tmp_track);
 * the caller may remove it earlier (support_rm_rf). */
char *support_tmpdir(char *buf, size_t len, const char *tag);

/* mkdtemp(3) and mkstemp(3) whose result is removed when the test's process exits
 * (support_tmp_track). Same returns and errno as theirs. */
char *support_mkdtemp(char *tmpl);
int support_mkstemp(char *tmpl);

/* Remove path (a file, or a directory and what is below it) when this process exits, also
 * after a failed assertion: Criterion ends the test body there, then runs the suite's fini and
 * exits the test's process, which runs the exit handlers (a test killed by its timeout or a
 * signal leaves its files). Only the process that tracked a path removes it: a child a test
 * forks does not take its parent's files with it when it exits. */
void support_tmp_track(const char *path);

/* Remove path and, for a directory, everything below it, without following links or
 * entering other mounted file systems (a mount left below path makes it fail with -EBUSY).
 * Returns 0 (also when path does not exist) or a negative errno of the first failure. */
int support_rm_rf(const char *path);

/* mkdir -p without a shell: path and every missing parent, 0755. Asserts. */
void support_mkdirs(const char *path);

/* The whole file as a malloc'd, NUL-terminated buffer (the caller frees); its length in
 * *len when len is not NULL. NULL with errno set when it cannot be read. */
char *support_read_file(const char *path, size_t *len);

/* support_read_file() for a file the test needs: fails the test when it cannot be read. */
char *support_slurp(const char *path, size_t *len);

/* Whether the files a/file and b/file hold the same bytes (fails the test when either cannot be
 * read). */
bool support_same_file(const char *a, const char *b, const char *file);

/* The CSV table dir/file (collectors/table; the caller destroys it). Fails the test when it
 * cannot be loaded. */
struct table *support_load_table(const char *dir, const char *file);

/* Write text to path (created or truncated). Fails the test when it cannot. */
void support_write_file(const char *path, const char *text);

/* A canary: a file outside what a test writes, planted with fixed text. Tests of writers that
 * must not follow a link planted to it check afterwards that it is intact. Fails the test when
 * it cannot be written. */
void support_canary_plant(const char *path);

/* Fail the test unless path is still a regular file (not a link) holding exactly the text
 * support_canary_plant() put there. */
void support_canary_intact(const char *path);

#endif
