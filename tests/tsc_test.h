/* Minimal test harness: CHECK records failures and goes on; tsc_test_done prints the closing
 * line "N passed, N failed" and returns the exit code. */
#ifndef TSC_TEST_H
#define TSC_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

static int tsc_t_pass, tsc_t_fail;

#define CHECK(cond) do { if (cond) tsc_t_pass++; else { tsc_t_fail++; \
  fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { if (cond) tsc_t_pass++; else { tsc_t_fail++; \
  fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); \
  fputc('\n', stderr); } } while (0)
#define CHECK_EQ_INT(a, b) CHECKF((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))
#define CHECK_EQ_U32(a, b) CHECKF((unsigned)(a) == (unsigned)(b), "0x%08x != 0x%08x", (unsigned)(a), (unsigned)(b))
#define CHECK_NEAR(a, b, tol) CHECKF(fabs((double)(a) - (double)(b)) <= (tol), "%.17g vs %.17g (tol %g)", \
  (double)(a), (double)(b), (double)(tol))
#define CHECK_STREQ(a, b) CHECKF(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))

/* Deterministic test data: a 64-bit LCG (Knuth's MMIX constants), its top 53 bits as a uniform
 * double in [0, 1), and a Box-Muller normal from two uniforms. */
static inline uint64_t tsc_test_lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 11;
}
static inline double tsc_test_urand(uint64_t *s) { return (double)tsc_test_lcg(s) / 9007199254740992.0; }
static inline double tsc_test_nrand(uint64_t *s) {
  double u1 = tsc_test_urand(s), u2 = tsc_test_urand(s);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Test files: write text to path (truncating); whether path holds exactly text (files up to 511
 * bytes); whether path exists (a dangling link counts: lstat). */
static inline void tsc_test_write_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return;
  fputs(text, fp);
  fclose(fp);
}
static inline int tsc_test_file_is(const char *path, const char *text) {
  char buf[512] = "";
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  return strcmp(buf, text) == 0;
}
static inline int tsc_test_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}
/* Removes a test's temporary folder and all in it: 0, or -1 after a note on stderr. */
static inline int tsc_test_rmtree(const char *dir) {
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) == 0) return 0;
  fprintf(stderr, "note: could not remove %s\n", dir);
  return -1;
}

static inline int tsc_test_done(void) {
  printf("%d passed, %d failed\n", tsc_t_pass, tsc_t_fail);
  return tsc_t_fail ? 1 : 0;
}
#endif
