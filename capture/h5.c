/* h5.c: checked HDF5 helpers (tsc_h5.h). */
#include "tsc_h5.h"
#include "tsc_file.h"
#include "capture_internal.h"
#include "tsc_mem.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static pthread_mutex_t h5_mutex;
static pthread_once_t h5_mutex_once = PTHREAD_ONCE_INIT;

static void h5_mutex_init(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&h5_mutex, &a);
    pthread_mutexattr_destroy(&a);
}

void tsc_h5_lock(void) {
    pthread_once(&h5_mutex_once, h5_mutex_init);
    pthread_mutex_lock(&h5_mutex);
}

void tsc_h5_unlock(void) { pthread_mutex_unlock(&h5_mutex); }

/* A forked child's copy of the mutex is owned by the parent's thread id (glibc checks it), so the
 * child can neither unlock nor take it: it gets a fresh, unlocked one. */
void tsc_h5_lock_child_reset(void) {
    pthread_once(&h5_mutex_once, h5_mutex_init);
    h5_mutex_init();
}

/* The scope's state belongs to the thread holding h5_mutex: only that thread reads or writes it.
 * The host's automatic error handler is saved at the outermost tsc_h5_enter and put back at the
 * matching tsc_h5_leave, in the API generation (H5Eset_auto1/2) the host installed it with, as
 * HDF5's own H5E_BEGIN_TRY does. */
static int scope_depth;
static unsigned saved_is_v2 = 1;
static H5E_auto2_t saved_func2;
#ifndef H5_NO_DEPRECATED_SYMBOLS
static H5E_auto1_t saved_func1;
#endif
static void *saved_data;

void tsc_h5_enter(void) {
    tsc_h5_lock();
    if (scope_depth++ > 0) return;
    /* HDF5 prints its error stack to stderr by default; library code must not print (every failure
     * is reported through tsc_error_set instead), but the host's own HDF5 calls keep their handler. */
    saved_is_v2 = 1;
#ifndef H5_NO_DEPRECATED_SYMBOLS
    if (H5Eauto_is_v2(H5E_DEFAULT, &saved_is_v2) < 0) saved_is_v2 = 1;
    if (!saved_is_v2) {
        if (H5Eget_auto1(&saved_func1, &saved_data) < 0) { saved_func1 = NULL; saved_data = NULL; }
        H5Eset_auto1(NULL, NULL);
        return;
    }
#endif
    if (H5Eget_auto2(H5E_DEFAULT, &saved_func2, &saved_data) < 0) { saved_func2 = NULL; saved_data = NULL; }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void tsc_h5_leave(void) {
    if (scope_depth <= 0) return;  /* unbalanced: a bug of the caller; do not unlock what it does not hold */
    if (--scope_depth == 0) {
#ifndef H5_NO_DEPRECATED_SYMBOLS
        if (!saved_is_v2) H5Eset_auto1(saved_func1, saved_data);
        else
#endif
            H5Eset_auto2(H5E_DEFAULT, saved_func2, saved_data);
    }
    tsc_h5_unlock();
}

static const char *h5_where(hid_t obj, char *buf, size_t cap) {
    char file[2048] = "?", name[1024] = "";
    if (cap == 0) return buf;
    if (H5Fget_name(obj, file, sizeof file) < 0) snprintf(file, sizeof file, "?");
    if (H5Iget_type(obj) != H5I_FILE && H5Iget_name(obj, name, sizeof name) < 0) name[0] = '\0';
    snprintf(buf, cap, "%s:%s", file, name[0] ? name : "/");
    return buf;
}

const char *tsc_h5_where(hid_t obj, char *buf, size_t cap) {
    TSC_H5_SCOPED(const char *, h5_where(obj, buf, cap));
}

/* ---- number formats as HDF5 floating-point types -------------------------------------------- */

typedef struct {
    tsc_format_t fmt;
    size_t size, spos, epos, esize, mpos, msize, ebias;
} layout_t;

/* Bit layouts (sign position, exponent position and size, mantissa position and size, bias). */
static const layout_t layouts[] = {
    {TSC_FMT_BF16, 2, 15, 7, 8, 0, 7, 127},
    {TSC_FMT_FP16, 2, 15, 10, 5, 0, 10, 15},
    {TSC_FMT_FP8_E4M3, 1, 7, 3, 4, 0, 3, 7},
    {TSC_FMT_FP8_E5M2, 1, 7, 2, 5, 0, 2, 15},
};

static hid_t h5_type_create(tsc_format_t fmt) {
    if (fmt == TSC_FMT_FP64) return H5Tcopy(H5T_IEEE_F64LE);
    if (tsc_format_size(fmt) == 4) return H5Tcopy(H5T_IEEE_F32LE); /* fp32, and tf32 and e8m* in its container */
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        const layout_t *l = &layouts[i];
        if (l->fmt != fmt) continue;
        /* Start from IEEE single (implied normalisation, zero padding) and shrink it: the fields
         * must fit inside the precision at every intermediate step, hence this order. */
        hid_t t = H5Tcopy(H5T_IEEE_F32LE);
        if (t < 0 || H5Tset_fields(t, l->spos, l->epos, l->esize, l->mpos, l->msize) < 0 ||
            H5Tset_offset(t, 0) < 0 || H5Tset_precision(t, l->size * 8) < 0 ||
            H5Tset_size(t, l->size) < 0 || H5Tset_ebias(t, l->ebias) < 0 ||
            H5Tset_norm(t, H5T_NORM_IMPLIED) < 0 || H5Tset_inpad(t, H5T_PAD_ZERO) < 0) {
            if (t >= 0) H5Tclose(t);
            (void)tsc_error_set(TSC_ERR_INTERNAL, "HDF5 refused the %s floating-point layout", tsc_format_name(fmt));
            return H5I_INVALID_HID;
        }
        return t;
    }
    (void)tsc_error_set(TSC_ERR_UNSUPPORTED, "no HDF5 type for number format %d", (int)fmt); /* the caller's detail */
    return H5I_INVALID_HID;
}

hid_t tsc_h5_type_create(tsc_format_t fmt) {
    TSC_H5_SCOPED(hid_t, h5_type_create(fmt));
}

static tsc_status_t h5_type_format(hid_t type, tsc_format_t *out) {
    H5T_class_t cls = H5Tget_class(type);
    if (cls != H5T_FLOAT)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "stored type is not floating-point (HDF5 class %d)", (int)cls);
    size_t size = H5Tget_size(type), spos, epos, esize, mpos, msize;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0)
        return tsc_error_set(TSC_ERR_FORMAT, "cannot read the floating-point fields of a stored type");
    size_t ebias = H5Tget_ebias(type);
    H5T_order_t order = H5Tget_order(type);
    if (size > 1 && order != H5T_ORDER_LE)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "big-endian floating-point data is not supported");
    if (size == 8 && msize == 52 && esize == 11 && ebias == 1023) { *out = TSC_FMT_FP64; return TSC_OK; }
    if (size == 4 && msize == 23 && esize == 8 && ebias == 127) { *out = TSC_FMT_FP32; return TSC_OK; }
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        const layout_t *l = &layouts[i];
        if (size == l->size && spos == l->spos && epos == l->epos && esize == l->esize &&
            mpos == l->mpos && msize == l->msize && ebias == l->ebias) {
            *out = l->fmt;
            return TSC_OK;
        }
    }
    return tsc_error_set(TSC_ERR_UNSUPPORTED,
                         "unknown floating-point layout: %zu bytes, sign bit %zu, exponent %zu bits at %zu "
                         "(bias %zu), mantissa %zu bits at %zu", size, spos, esize, epos, ebias, msize, mpos);
}

tsc_status_t tsc_h5_type_format(hid_t type, tsc_format_t *out) {
    TSC_H5_SCOPED(tsc_status_t, h5_type_format(type, out));
}

/* ---- files ----------------------------------------------------------------------------------- */

static hid_t strong_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* Strong close: H5Fclose closes every object still open in the file, so an error path that
     * forgot a group id cannot keep the file open (and unrenamed) behind our back. */
    if (fapl >= 0) H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    return fapl;
}

static tsc_status_t h5_create(tsc_h5_file_t *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fid = H5I_INVALID_HID;
    f->out.slot = -1;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "empty output path");
    if (strlen(path) >= sizeof f->path) return tsc_error_set(TSC_ERR_ARG, "%s: path too long", path);
    /* The temporary is created exclusively (never through a link planted at its name) and the
     * target is refused when it is a directory, FIFO or device; HDF5 then truncates our own file. */
    tsc_status_t st = tsc_out_open_name(&f->out, path);
    if (st != TSC_OK) return st;
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp, sizeof f->tmp, "%s", f->out.tmp);
    hid_t fapl = strong_fapl();
    f->fid = H5Fcreate(f->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f->fid < 0) {
        st = tsc_error_set(TSC_ERR_IO, "%s: HDF5 cannot create temporary file %s", path, f->tmp);
        tsc_out_abort(&f->out);
        f->tmp[0] = '\0';
        return st;
    }
    return TSC_OK;
}

tsc_status_t tsc_h5_create(tsc_h5_file_t *f, const char *path) {
    TSC_H5_SCOPED(tsc_status_t, h5_create(f, path));
}

static tsc_status_t h5_commit(tsc_h5_file_t *f) {
    if (f->fid < 0) return tsc_error_set(TSC_ERR_ARG, "%s: file is not open", f->path);
    herr_t e = H5Fclose(f->fid);
    f->fid = H5I_INVALID_HID;
    tsc_status_t st;
    if (e < 0) {
        st = tsc_error_set(TSC_ERR_IO, "%s: closing the temporary file %s failed (disk full?)", f->path, f->tmp);
        tsc_out_abort(&f->out);
    } else {
        st = tsc_out_commit(&f->out);  /* renames into place, or removes the temporary */
    }
    f->tmp[0] = '\0';
    return st;
}

tsc_status_t tsc_h5_commit(tsc_h5_file_t *f) {
    TSC_H5_SCOPED(tsc_status_t, h5_commit(f));
}

static void h5_abort(tsc_h5_file_t *f) {
    if (f->fid >= 0) H5Fclose(f->fid);
    f->fid = H5I_INVALID_HID;
    tsc_out_abort(&f->out);
    f->tmp[0] = '\0';
}

void tsc_h5_abort(tsc_h5_file_t *f) {
    TSC_H5_SCOPED_VOID(h5_abort(f));
}

/* ---- untrusted input ------------------------------------------------------------------------ */

int tsc_h5_trusted(void) {
    const char *e = getenv("TSC_ALLOW_EXTERNAL");
    return e && !strcmp(e, "1");
}

/* External-link traversal callback that refuses every traversal (the defence in depth behind
 * tsc_h5_check_link: a link missed by the walk still leads nowhere). */
static herr_t deny_elink(const char *parent_file, const char *parent_group, const char *child_file,
                         const char *child_object, unsigned *acc_flags, hid_t fapl_id, void *op_data) {
    (void)parent_file, (void)parent_group, (void)child_file, (void)child_object;
    (void)acc_flags, (void)fapl_id, (void)op_data;
    return -1;
}

/* The deny-list of one access class (link, dataset or group access: the latter two derive from
 * link access, so they carry the traversal settings too), made once and kept. */
static hid_t deny_plist(hid_t cls, hid_t *slot) {
    if (tsc_h5_trusted()) return H5P_DEFAULT;
    tsc_h5_lock();
    if (*slot < 0) {
        hid_t l = H5Pcreate(cls);
        if (l >= 0 && (H5Pset_elink_cb(l, deny_elink, NULL) < 0 || H5Pset_nlinks(l, 8) < 0)) {
            H5Pclose(l);
            l = H5I_INVALID_HID;
        }
        *slot = l;
    }
    tsc_h5_unlock();
    return *slot >= 0 ? *slot : H5P_DEFAULT;
}

static hid_t deny_l = H5I_INVALID_HID, deny_d = H5I_INVALID_HID, deny_g = H5I_INVALID_HID;
hid_t tsc_h5_lapl(void) { return deny_plist(H5P_LINK_ACCESS, &deny_l); }
hid_t tsc_h5_dapl(void) { return deny_plist(H5P_DATASET_ACCESS, &deny_d); }
hid_t tsc_h5_gapl(void) { return deny_plist(H5P_GROUP_ACCESS, &deny_g); }

tsc_status_t tsc_h5_check_regular(const char *path) {
    struct stat st;
    /* a folder gets the dump reader's own wording; everything else is util's one check */
    if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return tsc_error_set(TSC_ERR_IO, "%s: is a folder, expected an HDF5 file", path);
    return tsc_file_check_regular(path);
}

/* One link name below loc (its parents already checked): a hard link, or a soft link that
 * resolves inside the file; never an external or user-defined link. */
static tsc_status_t check_one_link(hid_t loc, const char *name) {
    char where[2048];
    H5L_info_t li;
    if (H5Lget_info(loc, name, &li, tsc_h5_lapl()) < 0)
        return tsc_error_set(TSC_ERR_MISSING, "%s: no object '%s'", tsc_h5_where(loc, where, sizeof where), name);
    if (li.type == H5L_TYPE_HARD) return TSC_OK;
    if (li.type == H5L_TYPE_EXTERNAL)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: '%s' is an external link (to another file); refused for an "
                             "untrusted file (set TSC_ALLOW_EXTERNAL=1 to follow it)",
                             tsc_h5_where(loc, where, sizeof where), name);
    if (li.type != H5L_TYPE_SOFT)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: '%s' is a user-defined link (type %d); refused",
                             tsc_h5_where(loc, where, sizeof where), name, (int)li.type);
    if (H5Oexists_by_name(loc, name, tsc_h5_lapl()) <= 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: '%s' is a soft link that does not resolve (it dangles, cycles or "
                             "leaves the file); refused", tsc_h5_where(loc, where, sizeof where), name);
    return TSC_OK;
}

static tsc_status_t h5_check_link(hid_t loc, const char *path) {
    char buf[1024];
    if (tsc_h5_trusted()) return TSC_OK;
    if (strlen(path) >= sizeof buf) return tsc_error_set(TSC_ERR_ARG, "object path too long: %s", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        tsc_status_t st = buf[0] ? check_one_link(loc, buf) : TSC_OK;
        if (st != TSC_OK) return st;
        if (!c) return TSC_OK;
        *p = c;
    }
}

tsc_status_t tsc_h5_check_link(hid_t loc, const char *path) {
    TSC_H5_SCOPED(tsc_status_t, h5_check_link(loc, path));
}

/* Bytes the dataset's extent needs uncompressed (saturating), 0 when unreadable. */
static uint64_t declared_bytes(hid_t ds) {
    hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t es = ty >= 0 ? H5Tget_size(ty) : 0;
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    if (n <= 0 || es == 0) return 0;
    return (uint64_t)n > UINT64_MAX / es ? UINT64_MAX : (uint64_t)n * es;
}

/* The check of tsc_h5_check_dataset; *stored (may be NULL) gets the storage size it measured,
 * or UINT64_MAX when it measured none (a virtual or external dataset let through as trusted).
 * H5Dget_storage_size walks every chunk of a chunked dataset (HDF5 1.10 sums the chunk index),
 * so a reader that opens a dataset once per head keeps this verdict (dump.c) instead of
 * asking again at each open. */
static tsc_status_t h5_check_dataset_stored(hid_t ds, uint64_t *stored) {
    char where[2048];
    if (stored) *stored = UINT64_MAX;
    hid_t pl = H5Dget_create_plist(ds);
    if (pl < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: unreadable creation properties", tsc_h5_where(ds, where, sizeof where));
    /* from the creation property list only: nothing here opens a VDS source or an external file */
    H5D_layout_t layout = H5Pget_layout(pl);
    int n_ext = H5Pget_external_count(pl);
    H5Pclose(pl);
    int foreign = layout == H5D_VIRTUAL || n_ext != 0;
    if (foreign && tsc_h5_trusted()) return TSC_OK;
    if (layout == H5D_VIRTUAL)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: a virtual dataset (its data is mapped from other datasets or "
                             "files); refused for an untrusted file (set TSC_ALLOW_EXTERNAL=1 to read it)",
                             tsc_h5_where(ds, where, sizeof where));
    if (n_ext != 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: its raw data is stored in external files; refused for an untrusted "
                             "file (set TSC_ALLOW_EXTERNAL=1 to read it)", tsc_h5_where(ds, where, sizeof where));
    if (layout < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: unreadable storage layout", tsc_h5_where(ds, where, sizeof where));
    uint64_t need = declared_bytes(ds), have = H5Dget_storage_size(ds);
    if (stored) *stored = have;
    if (have < need / TSC_H5_MAX_RATIO)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: declares %llu bytes of data but stores %llu, less than 1/%d of it "
                             "(never-written chunks or a forged extent); refused", tsc_h5_where(ds, where, sizeof where),
                             (unsigned long long)need, (unsigned long long)have, TSC_H5_MAX_RATIO);
    return TSC_OK;
}

tsc_status_t tsc_h5_check_dataset(hid_t ds) {
    TSC_H5_SCOPED(tsc_status_t, h5_check_dataset_stored(ds, NULL));
}

tsc_status_t tsc_h5_check_dataset_stored(hid_t ds, uint64_t *stored) {
    TSC_H5_SCOPED(tsc_status_t, h5_check_dataset_stored(ds, stored));
}

static tsc_status_t h5_open(hid_t *fid, const char *path, int rw) {
    *fid = H5I_INVALID_HID;
    struct stat st;
    /* stat before any open: opening a FIFO for reading blocks until a writer comes */
    tsc_status_t rs = tsc_h5_check_regular(path);
    if (rs != TSC_OK) return rs;
    if (stat(path, &st) != 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int fd = open(path, (rw ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat fst;
    int regular = fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode);  /* swapped since the stat? */
    close(fd);
    if (!regular) return tsc_error_set(TSC_ERR_IO, "%s: not a regular file (a FIFO, device or socket); refused", path);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: not an HDF5 file (no HDF5 signature%s)", path,
                             st.st_size == 0 ? "; the file is empty" : "");
    /* default (weak) close degree here: a file opened twice in one process (by h5py and by us,
     * say) must be opened with the same degree, and HDF5's default is what others use */
    *fid = H5Fopen(path, rw ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*fid < 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: HDF5 cannot open it: the file is truncated or corrupt "
                             "(%lld bytes on disk)", path, (long long)st.st_size);
    return TSC_OK;
}

tsc_status_t tsc_h5_open(hid_t *fid, const char *path, int rw) {
    TSC_H5_SCOPED(tsc_status_t, h5_open(fid, path, rw));
}

static void h5_close(hid_t id) {
    if (id < 0) return;
    switch (H5Iget_type(id)) {
    case H5I_FILE: H5Fclose(id); break;
    case H5I_GROUP: H5Gclose(id); break;
    case H5I_DATASET: H5Dclose(id); break;
    case H5I_DATASPACE: H5Sclose(id); break;
    case H5I_DATATYPE: H5Tclose(id); break;
    case H5I_ATTR: H5Aclose(id); break;
    default: break;
    }
}

void tsc_h5_close(hid_t id) { TSC_H5_SCOPED_VOID(h5_close(id)); }

static tsc_status_t h5_read_doubles(hid_t loc, const char *path, int max_rank, double **data, int *rank,
                                    long long *dims) {
    char where[2400];
    *data = NULL;
    if (!tsc_h5_exists(loc, path))
        return tsc_error_set(TSC_ERR_MISSING, "%s: no dataset %s", tsc_h5_where(loc, where, sizeof where), path);
    tsc_status_t cs = h5_check_link(loc, path);
    if (cs != TSC_OK) return cs;
    hid_t d = H5Dopen2(loc, path, tsc_h5_dapl());
    if (d >= 0 && (cs = h5_check_dataset_stored(d, NULL)) != TSC_OK) {
        H5Dclose(d);
        return cs;
    }
    hid_t sp = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
    int r = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t hd[H5S_MAX_RANK];
    tsc_status_t st = TSC_OK;
    if (d < 0 || sp < 0 || r < 0 || r > max_rank || H5Sget_simple_extent_dims(sp, hd, NULL) < 0) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s/%s: cannot read its shape (expected rank <= %d)",
                           tsc_h5_where(loc, where, sizeof where), path, max_rank);
    } else {
        size_t n = 1;
        for (int i = 0; i < r; i++) {
            if (hd[i] && n > ((size_t)1 << 40) / hd[i]) {
                n = 0;
                st = tsc_error_set(TSC_ERR_FORMAT, "%s/%s: dataset too large", tsc_h5_where(loc, where, sizeof where),
                                   path);
                break;
            }
            n *= (size_t)hd[i];
            dims[i] = (long long)hd[i];
        }
        *rank = r;
        if (st == TSC_OK && tsc_mem_check((uint64_t)n * sizeof(double), "reading a dataset as doubles") != TSC_OK)
            st = tsc_error_wrap(TSC_ERR_UNSUPPORTED, "%s/%s: ", tsc_h5_where(loc, where, sizeof where), path);
        double *buf = st == TSC_OK ? malloc((n ? n : 1) * sizeof *buf) : NULL;
        if (st == TSC_OK && !buf) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
        else if (st == TSC_OK && n && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            st = tsc_error_set(TSC_ERR_FORMAT, "%s/%s: H5Dread failed (corrupt file?)",
                               tsc_h5_where(loc, where, sizeof where), path);
        } else if (st == TSC_OK) *data = buf;
    }
    h5_close(sp);
    h5_close(d);
    return st;
}

tsc_status_t tsc_h5_read_doubles(hid_t loc, const char *path, int max_rank, double **data, int *rank,
                                 long long *dims) {
    TSC_H5_SCOPED(tsc_status_t, h5_read_doubles(loc, path, max_rank, data, rank, dims));
}

/* ---- groups ---------------------------------------------------------------------------------- */

static tsc_status_t h5_group_create(hid_t loc, const char *path, hid_t *out) {
    char buf[1024], where[2048];
    if (out) *out = H5I_INVALID_HID;
    if (strlen(path) >= sizeof buf) return tsc_error_set(TSC_ERR_ARG, "group path too long: %s", path);
    snprintf(buf, sizeof buf, "%s", path);
    hid_t cur = loc;
    int own = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        htri_t ex = H5Lexists(cur, tok, H5P_DEFAULT);
        hid_t g = H5I_INVALID_HID;
        if (ex > 0) {
            g = H5Gopen2(cur, tok, H5P_DEFAULT);
        } else if (ex == 0) {
            hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
            if (gcpl >= 0) H5Pset_obj_track_times(gcpl, 0);  /* reproducible bytes, as for datasets */
            g = H5Gcreate2(cur, tok, H5P_DEFAULT, gcpl >= 0 ? gcpl : H5P_DEFAULT, H5P_DEFAULT);
            if (gcpl >= 0) H5Pclose(gcpl);
        }
        if (g < 0) {
            tsc_h5_where(cur, where, sizeof where);
            if (own) H5Gclose(cur);
            return tsc_error_set(TSC_ERR_IO, "%s: cannot create or open group '%s'", where, tok);
        }
        if (own) H5Gclose(cur);
        cur = g;
        own = 1;
    }
    if (!own) return tsc_error_set(TSC_ERR_ARG, "empty group path");
    if (out) *out = cur;
    else H5Gclose(cur);
    return TSC_OK;
}

tsc_status_t tsc_h5_group_create(hid_t loc, const char *path, hid_t *out) {
    TSC_H5_SCOPED(tsc_status_t, h5_group_create(loc, path, out));
}

static int h5_exists(hid_t loc, const char *path) {
    char buf[1024];
    if (strlen(path) >= sizeof buf) return 0;
    snprintf(buf, sizeof buf, "%s", path);
    /* H5Lexists on "a/b" fails (not 0) when "a" is missing, so check component by component. */
    for (char *p = buf; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (H5Lexists(loc, buf, H5P_DEFAULT) <= 0) return 0;
        *p = '/';
    }
    return H5Lexists(loc, buf, H5P_DEFAULT) > 0;
}

int tsc_h5_exists(hid_t loc, const char *path) {
    TSC_H5_SCOPED(int, h5_exists(loc, path));
}

/* ---- attributes ------------------------------------------------------------------------------ */

static tsc_status_t attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space,
                               const void *buf) {
    char where[2048];
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0)
        return tsc_error_set(TSC_ERR_IO, "%s: cannot replace attribute '%s'", tsc_h5_where(obj, where, sizeof where), name);
    hid_t a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, mtype, buf);
    if (a >= 0) H5Aclose(a);
    if (e < 0)
        return tsc_error_set(TSC_ERR_IO, "%s: cannot write attribute '%s'", tsc_h5_where(obj, where, sizeof where), name);
    return TSC_OK;
}

static tsc_status_t h5_attr_write_str(hid_t obj, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    hid_t s = H5Screate(H5S_SCALAR);
    tsc_status_t st;
    if (t < 0 || s < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)
        st = tsc_error_set(TSC_ERR_INTERNAL, "cannot make a string type for attribute '%s'", name);
    else
        st = attr_write(obj, name, t, t, s, &value);
    if (t >= 0) H5Tclose(t);
    if (s >= 0) H5Sclose(s);
    return st;
}

tsc_status_t tsc_h5_attr_write_str(hid_t obj, const char *name, const char *value) {
    TSC_H5_SCOPED(tsc_status_t, h5_attr_write_str(obj, name, value));
}

static tsc_status_t attr_write_arr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v,
                                   size_t n, int scalar) {
    hsize_t dim = n;
    hid_t s = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
    if (s < 0) return tsc_error_set(TSC_ERR_INTERNAL, "cannot make a dataspace for attribute '%s'", name);
    tsc_status_t st = attr_write(obj, name, ftype, mtype, s, v);
    H5Sclose(s);
    return st;
}

tsc_status_t tsc_h5_attr_write_double(hid_t obj, const char *name, double value) {
    TSC_H5_SCOPED(tsc_status_t, attr_write_arr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, 1, 1));
}
tsc_status_t tsc_h5_attr_write_long(hid_t obj, const char *name, long value) {
    long long v = value;
    TSC_H5_SCOPED(tsc_status_t, attr_write_arr(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &v, 1, 1));
}
tsc_status_t tsc_h5_attr_write_longs(hid_t obj, const char *name, const long *values, size_t n) {
    long long tmp[256];
    long long *v = n <= 256 ? tmp : malloc(n * sizeof *v);
    if (!v) return tsc_error_set(TSC_ERR_NOMEM, "attribute '%s': out of memory", name);
    for (size_t i = 0; i < n; i++) v[i] = values[i];
    /* An empty list is stored as a one-dimensional dataspace of size 0 (h5py reads array([])). */
    tsc_h5_enter();
    tsc_status_t st = attr_write_arr(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, v, n, 0);
    tsc_h5_leave();
    if (v != tmp) free(v);
    return st;
}
tsc_status_t tsc_h5_attr_write_doubles(hid_t obj, const char *name, const double *values, size_t n) {
    TSC_H5_SCOPED(tsc_status_t, attr_write_arr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, values, n, 0));
}

static hid_t attr_open(hid_t obj, const char *name, tsc_status_t *st) {
    char where[2048];
    htri_t ex = H5Aexists(obj, name);
    if (ex <= 0) {
        *st = tsc_error_set(ex == 0 ? TSC_ERR_MISSING : TSC_ERR_FORMAT, "%s: attribute '%s' %s",
                            tsc_h5_where(obj, where, sizeof where), name, ex == 0 ? "is missing" : "is unreadable");
        return H5I_INVALID_HID;
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        *st = tsc_error_set(TSC_ERR_FORMAT, "%s: attribute '%s' is unreadable", tsc_h5_where(obj, where, sizeof where), name);
    else
        *st = TSC_OK;
    return a;
}

/* ---- the declared length of a variable-length string, before it is read ----------------------
 * HDF5 reads a variable-length string attribute by allocating, zero-filling and copying the
 * length its descriptor in the file declares (4 bytes: up to 4 GiB) times the size of the
 * string's base type (4 bytes more in the datatype message), whatever the heap object behind it
 * holds: a 680 KB dump with one forged byte there made `tilescope info` take 12-39 s (each open
 * of the dataset read its dtype attribute again). HDF5 has no call that gives that length, so
 * the descriptor itself is read first: a soft conversion from variable-length strings to an
 * opaque type of tilescope's own tag (registered once, accepting no other destination, so no
 * other conversion of the process changes) copies the descriptor's bytes as they are in the
 * file: the length (little-endian, 4 bytes), then the global heap id. The length times the base
 * type's size is checked against TSC_H5_MAX_STR before the string is read. */

#define VLEN_DESC_TAG "tilescope:vlen-string-descriptor"
#define VLEN_DESC_SIZE 64 /* 4 + a heap address (at most 32 bytes here) + 4 */

static herr_t vlen_desc_conv(hid_t src, hid_t dst, H5T_cdata_t *cd, size_t n, size_t stride, size_t bkg_stride,
                             void *buf, void *bkg, hid_t dxpl) {
    (void)bkg_stride, (void)bkg, (void)dxpl;
    if (cd->command == H5T_CONV_FREE) return 0;
    if (cd->command == H5T_CONV_INIT) {
        char *tag = H5Tget_class(dst) == H5T_OPAQUE ? H5Tget_tag(dst) : NULL;
        int ours = tag && !strcmp(tag, VLEN_DESC_TAG) && H5Tget_size(dst) == VLEN_DESC_SIZE &&
                   H5Tis_variable_str(src) > 0;
        if (tag) H5free_memory(tag);
        if (!ours) return -1; /* not this conversion: HDF5 keeps looking */
        cd->need_bkg = H5T_BKG_NO;
        return 0;
    }
    size_t ss = H5Tget_size(src);
    if (ss == 0 || ss > VLEN_DESC_SIZE) return -1;
    /* in place, from the last element (the destination is the wider) */
    unsigned char *b = buf;
    for (size_t i = n; i-- > 0;) {
        unsigned char one[VLEN_DESC_SIZE] = {0};
        memcpy(one, b + i * (stride ? stride : ss), ss);
        memcpy(b + i * (stride ? stride : VLEN_DESC_SIZE), one, VLEN_DESC_SIZE);
    }
    return 0;
}

/* A new opaque type to read a descriptor as (caller H5Tclose's it), the conversion registered
 * with it on the first call; H5I_INVALID_HID when HDF5 refused either. A type is not kept open
 * between calls: a datatype id held by the library counts as an object still open
 * (H5Fget_obj_count). Called in the HDF5 scope. */
static hid_t vlen_desc_type(void) {
    static int registered;
    hid_t o = H5Tcreate(H5T_OPAQUE, VLEN_DESC_SIZE);
    if (o < 0 || H5Tset_tag(o, VLEN_DESC_TAG) < 0) {
        if (o >= 0) H5Tclose(o);
        return H5I_INVALID_HID;
    }
    if (!registered) {
        hid_t vs = H5Tcopy(H5T_C_S1);
        if (vs >= 0 && H5Tset_size(vs, H5T_VARIABLE) >= 0 &&
            H5Tregister(H5T_PERS_SOFT, "tilescope_vlen_string_descriptor", vs, o, vlen_desc_conv) >= 0)
            registered = 1;
        if (vs >= 0) H5Tclose(vs);
    }
    if (!registered) {
        H5Tclose(o);
        return H5I_INVALID_HID;
    }
    return o;
}

/* The bytes reading the variable-length string attribute a (of file type t, one element) would
 * allocate: its declared length times its base type's size (saturating). TSC_ERR_FORMAT when the
 * descriptor cannot be read. */
static tsc_status_t vlen_str_declared(hid_t a, hid_t t, uint64_t *bytes) {
    hid_t op = vlen_desc_type();
    unsigned char d[VLEN_DESC_SIZE] = {0};
    herr_t e = op >= 0 ? H5Aread(a, op, d) : -1;
    if (op >= 0) H5Tclose(op);
    if (e < 0) return TSC_ERR_FORMAT;
    uint64_t len = (uint64_t)d[0] | (uint64_t)d[1] << 8 | (uint64_t)d[2] << 16 | (uint64_t)d[3] << 24;
    hid_t base = H5Tget_super(t);
    size_t bs = base >= 0 ? H5Tget_size(base) : 1;
    if (base >= 0) H5Tclose(base);
    *bytes = bs && len > UINT64_MAX / bs ? UINT64_MAX : len * (bs ? bs : 1);
    if (len > *bytes) *bytes = len; /* the memory copy is len bytes whatever the base */
    return TSC_OK;
}

/* Closes an open attribute with its type and dataspace (either may be invalid). */
static void attr_close(hid_t a, hid_t t, hid_t s) {
    if (t >= 0) H5Tclose(t);
    if (s >= 0) H5Sclose(s);
    H5Aclose(a);
}

static tsc_status_t h5_attr_read_str(hid_t obj, const char *name, char *value, size_t cap) {
    char where[2048];
    tsc_status_t st;
    if (cap) value[0] = '\0';
    hid_t a = attr_open(obj, name, &st);
    if (a < 0) return st;
    hid_t t = H5Aget_type(a), s = H5Aget_space(a), m = H5I_INVALID_HID;
    st = TSC_OK;
    if (t < 0 || s < 0 || H5Tget_class(t) != H5T_STRING || H5Sget_simple_extent_npoints(s) != 1) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: attribute '%s' is not a single string",
                           tsc_h5_where(obj, where, sizeof where), name);
    } else if (H5Tis_variable_str(t) > 0) {
        char *p = NULL;
        uint64_t declared = 0;
        if (vlen_str_declared(a, t, &declared) != TSC_OK)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: cannot read string attribute '%s' (its descriptor is unreadable)",
                               tsc_h5_where(obj, where, sizeof where), name);
        else if (declared > TSC_H5_MAX_STR)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: string attribute '%s' declares %llu bytes, more than the %d "
                               "tilescope reads (a forged length); refused", tsc_h5_where(obj, where, sizeof where),
                               name, (unsigned long long)declared, TSC_H5_MAX_STR);
        if (st != TSC_OK) {
        } else if ((m = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(m, H5T_VARIABLE) < 0 ||
                   H5Tset_cset(m, H5Tget_cset(t)) < 0 || H5Aread(a, m, &p) < 0)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: cannot read string attribute '%s'",
                               tsc_h5_where(obj, where, sizeof where), name);
        else if (cap)
            snprintf(value, cap, "%s", p ? p : "");
        if (p) H5free_memory(p);
    } else {
        /* Fixed length: read the stored bytes with the file's own type (no conversion: HDF5's
         * string conversion between paddings drops the last character of a NULLPAD string that
         * fills its size, h5py's np.bytes_), then apply the padding ourselves: the text ends at
         * the first NUL (NULLTERM, NULLPAD), and SPACEPAD's trailing spaces are padding. */
        size_t n = H5Tget_size(t);
        char *buf = n <= TSC_H5_MAX_STR ? calloc(n + 1, 1) : NULL;
        m = H5Tcopy(t);
        if (n > TSC_H5_MAX_STR)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: string attribute '%s' declares %zu bytes, more than the %d "
                               "tilescope reads (a forged length); refused", tsc_h5_where(obj, where, sizeof where),
                               name, n, TSC_H5_MAX_STR);
        else if (!buf) st = tsc_error_set(TSC_ERR_NOMEM, "attribute '%s': out of memory", name);
        else if (m < 0 || H5Aread(a, m, buf) < 0)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: cannot read string attribute '%s'",
                               tsc_h5_where(obj, where, sizeof where), name);
        else if (cap) {
            const char *nul = memchr(buf, '\0', n);
            size_t len = nul ? (size_t)(nul - buf) : n;
            if (H5Tget_strpad(t) == H5T_STR_SPACEPAD)
                while (len > 0 && buf[len - 1] == ' ') len--;
            snprintf(value, cap, "%.*s", (int)len, buf);
        }
        free(buf);
    }
    if (m >= 0) H5Tclose(m);
    attr_close(a, t, s);
    return st;
}

tsc_status_t tsc_h5_attr_read_str(hid_t obj, const char *name, char *value, size_t cap) {
    TSC_H5_SCOPED(tsc_status_t, h5_attr_read_str(obj, name, value, cap));
}

/* Reads a numeric attribute (any size) as long long or double into v[0..cap); count in *n. */
static tsc_status_t attr_read_num(hid_t obj, const char *name, int as_double, void *v, size_t cap, size_t *n) {
    char where[2048];
    tsc_status_t st;
    hid_t a = attr_open(obj, name, &st);
    if (a < 0) return st;
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    hssize_t np = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    st = TSC_OK;
    if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || np < 0) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: attribute '%s' is not numeric",
                           tsc_h5_where(obj, where, sizeof where), name);
    } else {
        double *buf = tsc_mem_check(((uint64_t)np + 1) * sizeof(double), "an attribute's values") == TSC_OK
                          ? malloc(((size_t)np + 1) * sizeof(double)) : NULL;
        /* Integers read through long long, floats through double: no precision lost either way. */
        hid_t mt = cls == H5T_INTEGER ? H5T_NATIVE_LLONG : H5T_NATIVE_DOUBLE;
        if (!buf) st = tsc_error_wrap(TSC_ERR_NOMEM, "%s: attribute '%s': ", tsc_h5_where(obj, where, sizeof where), name);
        else if (np > 0 && H5Aread(a, mt, buf) < 0)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: cannot read attribute '%s'", tsc_h5_where(obj, where, sizeof where), name);
        else {
            for (size_t i = 0; i < (size_t)np && i < cap && st == TSC_OK; i++) {
                double dv = cls == H5T_INTEGER ? (double)((long long *)buf)[i] : buf[i];
                /* an integer stored as a float must be one exactly: 0.5 is not rounded to 0 */
                if (!as_double && cls == H5T_FLOAT && !(dv == floor(dv) && fabs(dv) < 9.2e18))
                    st = tsc_error_set(TSC_ERR_FORMAT, "%s: attribute '%s' = %.17g, expected an integer",
                                       tsc_h5_where(obj, where, sizeof where), name, dv);
                /* converted only when it is an integer in range: (long long) of 1e307 or NaN is undefined */
                if (as_double) ((double *)v)[i] = dv;
                else if (st == TSC_OK)
                    ((long *)v)[i] = (long)(cls == H5T_INTEGER ? ((long long *)buf)[i] : (long long)buf[i]);
            }
            if (st == TSC_OK) *n = (size_t)np;
        }
        free(buf);
    }
    attr_close(a, t, s);
    return st;
}

/* One numeric attribute value (a scalar or a 1-element array). */
static tsc_status_t attr_read_one(hid_t obj, const char *name, int as_double, void *value) {
    size_t n = 0;
    char where[2048];
    tsc_status_t st = attr_read_num(obj, name, as_double, value, 1, &n);
    if (st == TSC_OK && n != 1)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: attribute '%s' has %zu values, expected 1",
                             tsc_h5_where(obj, where, sizeof where), name, n);
    return st;
}
tsc_status_t tsc_h5_attr_read_double(hid_t obj, const char *name, double *value) {
    TSC_H5_SCOPED(tsc_status_t, attr_read_one(obj, name, 1, value));
}
tsc_status_t tsc_h5_attr_read_long(hid_t obj, const char *name, long *value) {
    TSC_H5_SCOPED(tsc_status_t, attr_read_one(obj, name, 0, value));
}
tsc_status_t tsc_h5_attr_read_longs(hid_t obj, const char *name, long *values, size_t cap, size_t *n) {
    *n = 0;
    TSC_H5_SCOPED(tsc_status_t, attr_read_num(obj, name, 0, values, cap, n));
}

/* ---- datasets -------------------------------------------------------------------------------- */

static tsc_status_t write_ds(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank,
                             const uint64_t *dims, const void *data, const char *dtype_name,
                             const char *dim_labels, const char *units, const tsc_h5_write_opts_t *opts) {
    char where[2048];
    hsize_t hd[32], ch[32];
    if (rank < 0 || rank > 32) return tsc_error_set(TSC_ERR_ARG, "dataset '%s': rank %d out of range", name, rank);
    int chunked = opts && opts->rank_chunk > 0 && rank > 0;
    uint64_t total = 1;
    for (int i = 0; i < rank; i++) {
        hd[i] = dims[i];
        total *= dims[i];
        ch[i] = (chunked && i >= rank - opts->rank_chunk) ? (dims[i] ? dims[i] : 1) : 1;
    }
    if (total == 0) chunked = 0;  /* zero-sized chunks are invalid; an empty dataset needs none */
    hid_t space = H5Screate_simple(rank, hd, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    tsc_status_t st = TSC_OK;
    if (space < 0 || dcpl < 0) st = tsc_error_set(TSC_ERR_INTERNAL, "dataset '%s': cannot create a dataspace", name);
    /* no modification times in the file: the same content gives the same bytes */
    if (st == TSC_OK) H5Pset_obj_track_times(dcpl, 0);
    if (st == TSC_OK && chunked) {
        if (H5Pset_chunk(dcpl, rank, ch) < 0 ||
            (opts->deflate > 0 && (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, (unsigned)opts->deflate) < 0)))
            st = tsc_error_set(TSC_ERR_ARG, "%s: cannot set chunking/compression of '%s'",
                               tsc_h5_where(loc, where, sizeof where), name);
    }
    if (st == TSC_OK && opts && opts->has_fill) {
        double f = opts->fill;
        if (H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &f) < 0)
            st = tsc_error_set(TSC_ERR_ARG, "%s: cannot set the fill value of '%s'", tsc_h5_where(loc, where, sizeof where), name);
    }
    hid_t ds = H5I_INVALID_HID;
    if (st == TSC_OK) {
        ds = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (ds < 0)
            st = tsc_error_set(TSC_ERR_IO, "%s: cannot create dataset '%s' (exists already?)",
                               tsc_h5_where(loc, where, sizeof where), name);
        else if (data && total && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
            st = tsc_error_set(TSC_ERR_IO, "%s: cannot write dataset '%s' (disk full?)",
                               tsc_h5_where(loc, where, sizeof where), name);
    }
    if (st == TSC_OK && dtype_name) st = tsc_h5_attr_write_str(ds, "dtype", dtype_name);
    if (st == TSC_OK && dim_labels) st = tsc_h5_attr_write_str(ds, "dims", dim_labels);
    if (st == TSC_OK && units) st = tsc_h5_attr_write_str(ds, "units", units);
    if (ds >= 0) H5Dclose(ds);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    return st;
}

static tsc_status_t h5_write_array(hid_t loc, const char *name, tsc_format_t store_fmt, int rank,
                                   const uint64_t *dims, const void *data, tsc_format_t src_fmt,
                                   const char *dim_labels, const char *units,
                                   const tsc_h5_write_opts_t *opts) {
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    hid_t ft = tsc_h5_type_create(store_fmt);
    if (ft < 0) return tsc_error_wrap(TSC_ERR_UNSUPPORTED, "dataset '%s': ", name);
    const void *buf = data;
    void *conv = NULL;
    hid_t mt = ft;
    tsc_status_t st = TSC_OK;
    if (src_fmt == store_fmt || (tsc_format_size(src_fmt) == 4 && store_fmt == TSC_FMT_FP32)) { /* FP32 containers */
        mt = ft;  /* bit for bit: the memory type is the file type, HDF5 converts nothing */
    } else if (src_fmt == TSC_FMT_FP32 && store_fmt == TSC_FMT_FP64) {
        mt = H5T_NATIVE_FLOAT;  /* exact widening by HDF5's hard conversion */
    } else {
        /* Round through float with our own nearest-even conversion (HDF5's soft conversion
         * would do too, but this way the rounding is the one the kernels define). */
        float *f = src_fmt == TSC_FMT_FP32 ? NULL : malloc((size_t)n * sizeof(float));
        conv = malloc((size_t)n * tsc_format_size(store_fmt) + 1);
        if ((src_fmt != TSC_FMT_FP32 && !f) || !conv) {
            st = tsc_error_set(TSC_ERR_NOMEM, "dataset '%s': out of memory converting %llu values", name,
                               (unsigned long long)n);
        } else {
            const float *fs = data;
            if (f) { tsc_convert_to_f32(src_fmt, data, f, (size_t)n); fs = f; }
            tsc_convert_from_f32(store_fmt, fs, conv, (size_t)n, TSC_ROUND_NEAREST_EVEN, NULL);
            buf = conv;
        }
        free(f);
    }
    if (st == TSC_OK)
        st = write_ds(loc, name, ft, mt, rank, dims, buf, tsc_format_name(store_fmt), dim_labels, units, opts);
    free(conv);
    H5Tclose(ft);
    return st;
}

tsc_status_t tsc_h5_write_array(hid_t loc, const char *name, tsc_format_t store_fmt, int rank,
                                const uint64_t *dims, const void *data, tsc_format_t src_fmt,
                                const char *dim_labels, const char *units,
                                const tsc_h5_write_opts_t *opts) {
    TSC_H5_SCOPED(tsc_status_t,
                  h5_write_array(loc, name, store_fmt, rank, dims, data, src_fmt, dim_labels, units, opts));
}

tsc_status_t tsc_h5_write_floats(hid_t loc, const char *name, int rank, const uint64_t *dims,
                                 const float *data, const char *dim_labels, const char *units) {
    return tsc_h5_write_array(loc, name, TSC_FMT_FP32, rank, dims, data, TSC_FMT_FP32, dim_labels, units, NULL);
}

tsc_status_t tsc_h5_write_doubles(hid_t loc, const char *name, int rank, const uint64_t *dims,
                                  const double *data, const char *dim_labels, const char *units) {
    return tsc_h5_write_array(loc, name, TSC_FMT_FP64, rank, dims, data, TSC_FMT_FP64, dim_labels, units, NULL);
}

tsc_status_t tsc_h5_write_ints(hid_t loc, const char *name, int rank, const uint64_t *dims,
                               const int64_t *data, const char *dim_labels, const char *units) {
    TSC_H5_SCOPED(tsc_status_t, write_ds(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, rank, dims, data, "int64",
                                         dim_labels, units, NULL));
}
