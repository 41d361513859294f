/* Unit tests of util/tsc_file.h: open/commit/abort, by-name outputs, exclusive temporaries (a file
 * or link at the temporary's name is never written through), refusing a directory and a FIFO,
 * and the target untouched on abort or a failed commit. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsc_file.h"
#include "tsc_test.h"

static char dir[256];

/* Entries of dir other than . and .. */
static int n_entries(void) {
    DIR *dp = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (dp) closedir(dp);
    return n;
}

static void test_commit_abort(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    tsc_out_t o;
    CHECK(tsc_out_open(&o, path) == TSC_OK);
    CHECK(o.fp != NULL && o.tmp != NULL && strcmp(o.path, path) == 0);
    CHECK(strncmp(o.tmp, path, strlen(path)) == 0 && strstr(o.tmp, ".tmp.") != NULL);
    CHECK(tsc_test_exists(o.tmp));
    CHECK(!tsc_test_exists(path));  /* nothing under the final name until commit */
    fputs("first version\n", o.fp);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    CHECK(tsc_out_commit(&o) == TSC_OK);
    CHECK(o.tmp == NULL && o.fp == NULL && o.path == NULL);
    CHECK(tsc_test_file_is(path, "first version\n"));
    CHECK(!tsc_test_exists(tmp));

    /* abort: the target keeps its old content, the temporary is gone */
    CHECK(tsc_out_open(&o, path) == TSC_OK);
    fputs("second version, abandoned\n", o.fp);
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    tsc_out_abort(&o);
    CHECK(o.tmp == NULL);
    CHECK(tsc_test_file_is(path, "first version\n"));
    CHECK(!tsc_test_exists(tmp));
    tsc_out_abort(&o);    /* a closed output: no-op */
    tsc_out_abort(NULL);
    CHECK(tsc_out_commit(&o) != TSC_OK);  /* commit without an open output */

    /* by name: the temporary exists, empty, for another writer to fill */
    CHECK(tsc_out_open_name(&o, path) == TSC_OK);
    CHECK(o.fp == NULL && tsc_test_exists(o.tmp));
    tsc_test_write_text(o.tmp, "written by name\n");
    CHECK(tsc_out_commit(&o) == TSC_OK);
    CHECK(tsc_test_file_is(path, "written by name\n"));

    /* write_all replaces the target whole */
    CHECK(tsc_out_write_all(path, "abc", 3) == TSC_OK);
    CHECK(tsc_test_file_is(path, "abc"));
    CHECK_EQ_INT(n_entries(), 1);  /* no temporary left behind by any of the above */
}

static void test_exclusive_temporaries(void) {
    char path[300], victim[300], link[400];
    snprintf(path, sizeof path, "%s/excl.txt", dir);
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    tsc_test_write_text(victim, "victim\n");
    /* links at every name the next temporaries could take (the counter is process-wide and
     * below 1000 here), and at the old "<path>.tmp.<pid>" */
    int planted = 0;
    for (int i = -1; i < 1000; i++) {
        if (i < 0) snprintf(link, sizeof link, "%s.tmp.%ld", path, (long)getpid());
        else snprintf(link, sizeof link, "%s.tmp.%ld.%d", path, (long)getpid(), i);
        planted += symlink(victim, link) == 0;
    }
    CHECK_EQ_INT(planted, 1001);
    tsc_out_t o;
    tsc_status_t st = tsc_out_open(&o, path);
    /* every try hit a planted link: it gives up rather than write through one */
    if (st == TSC_OK) {
        struct stat sb;
        CHECK(lstat(o.tmp, &sb) == 0 && S_ISREG(sb.st_mode));
        fputs("output\n", o.fp);
        CHECK(tsc_out_commit(&o) == TSC_OK);
        CHECK(tsc_test_file_is(path, "output\n"));
    } else {
        CHECK(st == TSC_ERR_IO);
        CHECK(!tsc_test_exists(path));
    }
    CHECK(tsc_test_file_is(victim, "victim\n"));
    for (int i = -1; i < 1000; i++) {
        if (i < 0) snprintf(link, sizeof link, "%s.tmp.%ld", path, (long)getpid());
        else snprintf(link, sizeof link, "%s.tmp.%ld.%d", path, (long)getpid(), i);
        unlink(link);
    }
    /* with the names free again it works, and two open outputs of one target get two names */
    tsc_out_t a, b;
    CHECK(tsc_out_open(&a, path) == TSC_OK);
    CHECK(tsc_out_open(&b, path) == TSC_OK);
    if (a.tmp && b.tmp) CHECK(strcmp(a.tmp, b.tmp) != 0);
    fputs("a\n", a.fp);
    fputs("b\n", b.fp);
    CHECK(tsc_out_commit(&a) == TSC_OK);
    CHECK(tsc_out_commit(&b) == TSC_OK);
    CHECK(tsc_test_file_is(path, "b\n"));  /* the last commit wins, whole */
    CHECK(tsc_test_file_is(victim, "victim\n"));
}

static void test_refused_targets(void) {
    char sub[300], fifo[300], inside[400];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK(mkdir(sub, 0700) == 0);
    CHECK(mkfifo(fifo, 0600) == 0);
    int before = n_entries();
    tsc_out_t o;
    CHECK(tsc_out_check(sub) == TSC_ERR_IO);
    CHECKF(strstr(tsc_error_last(), "directory") != NULL, "%s", tsc_error_last());
    CHECK(tsc_out_open(&o, sub) == TSC_ERR_IO);
    CHECK(o.tmp == NULL && o.fp == NULL);
    CHECK(tsc_out_check(fifo) == TSC_ERR_IO);
    CHECKF(strstr(tsc_error_last(), "FIFO") != NULL, "%s", tsc_error_last());
    CHECK(tsc_out_open_name(&o, fifo) == TSC_ERR_IO);
    CHECK(tsc_out_write_all(fifo, "x", 1) == TSC_ERR_IO);
    CHECK_EQ_INT(n_entries(), before);  /* no temporary made for a refused target */
    struct stat st;
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    /* a link to a regular file is a regular target: the commit replaces the link, not the file */
    char lnk[300], victim[300];
    snprintf(lnk, sizeof lnk, "%s/lnk", dir);
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    CHECK(symlink(victim, lnk) == 0);
    CHECK(tsc_out_check(lnk) == TSC_OK);
    CHECK(tsc_out_write_all(lnk, "replaced\n", 9) == TSC_OK);
    CHECK(tsc_test_file_is(victim, "victim\n"));
    CHECK(lstat(lnk, &st) == 0 && S_ISREG(st.st_mode) && tsc_test_file_is(lnk, "replaced\n"));
    /* an empty name is a usage error; a missing folder is an error naming the path */
    CHECK(tsc_out_check("") == TSC_ERR_ARG);
    snprintf(inside, sizeof inside, "%s/missing/x.txt", dir);
    CHECK(tsc_out_open(&o, inside) == TSC_ERR_IO);
    CHECKF(strstr(tsc_error_last(), inside) != NULL, "%s", tsc_error_last());
}

int main(void) {
    alarm(60);  /* opening the FIFO for writing would block: fail instead */
    snprintf(dir, sizeof dir, "/tmp/tsc_file_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_commit_abort();
    test_exclusive_temporaries();
    test_refused_targets();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
