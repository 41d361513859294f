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
/* Each argument is evaluated once: a failing call must not be re-run to print its value. */
#define TSC_T_CMP(T, a, b, eq, fmt) do { T tsc_a_ = (T)(a), tsc_b_ = (T)(b); if (eq) tsc_t_pass++; else { \
  tsc_t_fail++; fprintf(stderr, "FAIL %s:%d: %s == %s: " fmt "\n", __FILE__, __LINE__, #a, #b, tsc_a_, tsc_b_); } \
  } while (0)
#define CHECK_EQ_INT(a, b) TSC_T_CMP(long long, a, b, tsc_a_ == tsc_b_, "%lld != %lld")
#define CHECK_EQ_U32(a, b) TSC_T_CMP(unsigned, a, b, tsc_a_ == tsc_b_, "0x%08x != 0x%08x")
#define CHECK_NEAR(a, b, tol) do { double tsc_a_ = (double)(a), tsc_b_ = (double)(b), tsc_t_ = (double)(tol); \
  if (fabs(tsc_a_ - tsc_b_) <= tsc_t_) tsc_t_pass++; else { tsc_t_fail++; fprintf(stderr, \
  "FAIL %s:%d: %s near %s: %.17g vs %.17g (tol %g)\n", __FILE__, __LINE__, #a, #b, tsc_a_, tsc_b_, tsc_t_); } \
  } while (0)
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
