/* import_internal.h: what the tensor-file readers (import_read.c, import_zip.c, import_pickle.c)
 * and the import (import.c) share. */
#ifndef TSC_IMPORT_INTERNAL_H
#define TSC_IMPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_import.h"
#include "tsc_status.h"

/* A tensor name from a file, fit for a message: 'name' in single quotes, control bytes, quotes and
 * backslashes as \xNN, cut at 120 bytes with "...". Returns buf. */
#define TSC_IMPORT_QUOTE_MAX 512
const char *tsc_import_quote(const char *s, char buf[TSC_IMPORT_QUOTE_MAX]);

/* Reads exactly n bytes at off of fd: TSC_ERR_IO on a read error, TSC_ERR_FORMAT "PATH: truncated:
 * the file ends inside WHAT" when the file is shorter. */
tsc_status_t tsc_import_pread(int fd, const char *path, void *buf, uint64_t n, uint64_t off, const char *what);

/* ---------------------------------------------------------------- zip archives (import_zip.c)
 * The central directory is read and checked whole at open: every member stored (method 0) or
 * deflated (8), not encrypted, on one disk, its local header and data inside the file before the
 * central directory, no two members' data overlapping, no name twice, ZIP64 fields honoured.
 * Members are read by range; a deflated member is inflated as a stream and never past its declared
 * size (a member that inflates further, or ends short, is refused), with its CRC checked whenever a
 * read reaches its end. */
typedef struct {
    char *name;
    int method;        /* 0 stored, 8 deflate */
    uint32_t crc;
    uint64_t csize, usize;
    uint64_t data;     /* file offset of the member's stored bytes */
} tsc_zip_member_t;

typedef struct {
    const char *path;  /* for messages */
    int fd;
    int n;
    tsc_zip_member_t *m;
    int *by_name;      /* member indices sorted by name */
} tsc_zip_t;

/* Do a file's first n bytes start a zip archive (a local-file or end-of-directory signature)? */
int tsc_zip_sniff(const unsigned char *head, size_t n);
tsc_status_t tsc_zip_open(tsc_zip_t *z, int fd, uint64_t size, const char *path);
void tsc_zip_close(tsc_zip_t *z);
/* The member named name, -1 when none. */
int tsc_zip_find(const tsc_zip_t *z, const char *name);
/* Bytes [off, off + n) of member i's contents into buf. */
tsc_status_t tsc_zip_read(const tsc_zip_t *z, int i, uint64_t off, uint64_t n, void *buf);

/* ---------------------------------------------------------------- torch pickles (import_pickle.c)
 * A restricted unpickler: it builds plain values (None, bools, integers, floats, strings, bytes,
 * tuples, lists, dicts) and, for the few globals torch.save writes around a tensor
 * (collections.OrderedDict, torch._utils._rebuild_tensor_v2 and its relatives, torch.*Storage as
 * persistent-id tags), a tensor record. Any other global, any opcode that builds an object by
 * calling a class, and every extension code is refused: nothing in the file is ever called. */
typedef struct {
    char *key;          /* the storage's key: the zip member data/<key>, or the legacy record's key */
    const char *type;   /* "FloatStorage", ... */
    tsc_format_t fmt;   /* its element format; TSC_FMT_FP32 etc., or -1 when tilescope stores none */
    unsigned elsize;    /* bytes per element */
    uint64_t numel;     /* elements the file declares */
} tsc_pt_storage_t;

typedef struct {
    char *name;         /* the dotted path of dict keys and list indices */
    int storage;        /* index into the storages */
    uint64_t offset;    /* storage offset, in elements */
    int rank;
    uint64_t size[TSC_TENSOR_RANK_MAX];
    uint64_t stride[TSC_TENSOR_RANK_MAX];
} tsc_pt_tensor_t;

typedef struct {
    int n_storage, n_tensor;
    tsc_pt_storage_t *storage;
    tsc_pt_tensor_t *tensor;
} tsc_pt_objects_t;

/* The legacy format's storage record list: the keys in the order their data follows. */
typedef struct {
    int n;
    char **key;
} tsc_pt_keys_t;

/* What a pickle is read as: the object pickle (tensors and storages into *out), the legacy format's
 * storage key list (into *keys), or one of its three header pickles (the magic number, the protocol
 * version 1001, sys_info on a little-endian machine), each checked against what torch writes. */
enum { TSC_PT_OBJECTS, TSC_PT_KEYS, TSC_PT_MAGIC, TSC_PT_PROTOCOL, TSC_PT_SYSINFO };
/* Runs the pickle in p[0, n) (what = "PATH: archive/data.pkl" for messages) as kind. *used: the
 * bytes it took (up to and including STOP), (size_t)-1 when the input ended inside it (a caller
 * holding only a window of the file may retry with more). */
tsc_status_t tsc_pt_unpickle(const unsigned char *p, size_t n, const char *what, int kind, tsc_pt_objects_t *out,
                             tsc_pt_keys_t *keys, size_t *used);
void tsc_pt_objects_free(tsc_pt_objects_t *o);
void tsc_pt_keys_free(tsc_pt_keys_t *k);

#endif
