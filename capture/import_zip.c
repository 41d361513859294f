/* import_zip.c: the zip reader under .npz and torch .pt archives (import_internal.h). Hostile input:
 * every count, size and offset of the central directory is checked against the file before it is
 * used, and a deflated member is inflated as a bounded stream (zlib), never past its declared size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "import_internal.h"
#include "tsc_mem.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define EOCD_LEN 22u
#define EOCD_SCAN (EOCD_LEN + 65535u)
/* Members one archive may hold (numpy and torch write one per array). */
#define ZIP_MEMBERS_MAX (1 << 22)
#define CHUNK (1u << 16)

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

int tsc_zip_sniff(const unsigned char *head, size_t n) {
    return n >= 4 && (le32(head) == SIG_LOCAL || le32(head) == SIG_EOCD);
}

static tsc_status_t bad(const tsc_zip_t *z, const char *what) {
    return tsc_error_set(TSC_ERR_FORMAT, "%s: damaged zip archive: %s", z->path, what);
}

/* The end of the central directory: (entries, size, offset) of the directory, ZIP64 when marked. */
static tsc_status_t find_directory(tsc_zip_t *z, uint64_t size, uint64_t *entries, uint64_t *cd_size, uint64_t *cd_off,
                                   uint64_t *cd_end) {
    if (size < EOCD_LEN) return bad(z, "shorter than an end-of-directory record");
    size_t scan = size < EOCD_SCAN ? (size_t)size : EOCD_SCAN;
    unsigned char *tail = malloc(scan);
    if (!tail) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", z->path);
    tsc_status_t st = tsc_import_pread(z->fd, z->path, tail, scan, size - scan, "the zip directory");
    long at = -1;
    /* The last record whose comment runs exactly to the end of the file. */
    for (long i = (long)scan - (long)EOCD_LEN; !st && i >= 0 && at < 0; i--)
        if (le32(tail + i) == SIG_EOCD && le16(tail + i + 20) == scan - (size_t)i - EOCD_LEN) at = i;
    if (!st && at < 0) st = bad(z, "no end-of-central-directory record");
    if (st) return free(tail), st;
    const unsigned char *e = tail + at;
    uint64_t eocd = size - scan + (uint64_t)at;
    if (le16(e + 4) || le16(e + 6)) return free(tail), bad(z, "spans several disks");
    *entries = le16(e + 10), *cd_size = le32(e + 12), *cd_off = le32(e + 16), *cd_end = eocd;
    int z64 = *entries == 0xffff || *cd_size == 0xffffffffu || *cd_off == 0xffffffffu;
    free(tail);
    if (!z64) return TSC_OK;
    unsigned char loc[20], rec[56];
    if (eocd < 20 || tsc_import_pread(z->fd, z->path, loc, 20, eocd - 20, "the ZIP64 locator") || le32(loc) != SIG_LOC64)
        return bad(z, "ZIP64 sizes without a ZIP64 locator");
    uint64_t r = le64(loc + 8);
    if (r > eocd - 20 || eocd - 20 - r < 56 || tsc_import_pread(z->fd, z->path, rec, 56, r, "the ZIP64 directory record") ||
        le32(rec) != SIG_EOCD64)
        return bad(z, "the ZIP64 end-of-directory record is missing");
    *entries = le64(rec + 32), *cd_size = le64(rec + 40), *cd_off = le64(rec + 48), *cd_end = r;
    return TSC_OK;
}

/* ZIP64 extended information (tag 1) for the fields that read 0xffffffff. */
static int zip64_extra(const unsigned char *x, size_t n, uint64_t *usize, uint64_t *csize, uint64_t *off) {
    uint64_t *want[3] = {usize, csize, off};
    while (n >= 4) {
        uint32_t tag = le16(x), len = le16(x + 2);
        if (len > n - 4) return -1;
        if (tag == 1) {
            const unsigned char *p = x + 4;
            for (int k = 0; k < 3; k++) {
                if (*want[k] != 0xffffffffu) continue;
                if (p + 8 > x + 4 + len) return -1;
                *want[k] = le64(p), p += 8;
            }
            return 0;
        }
        x += 4 + len, n -= 4 + len;
    }
    return *usize == 0xffffffffu || *csize == 0xffffffffu || *off == 0xffffffffu ? -1 : 0;
}

static const tsc_zip_t *sort_z;
static int cmp_member_name(const void *a, const void *b) {
    return strcmp(sort_z->m[*(const int *)a].name, sort_z->m[*(const int *)b].name);
}
static int cmp_member_data(const void *a, const void *b) {
    const tsc_zip_member_t *x = &sort_z->m[*(const int *)a], *y = &sort_z->m[*(const int *)b];
    return x->data < y->data ? -1 : x->data > y->data;
}

/* One central-directory entry at p (cd_end - p bytes left) into m; *len its length. */
static tsc_status_t parse_entry(tsc_zip_t *z, const unsigned char *p, size_t left, tsc_zip_member_t *m, size_t *len) {
    if (left < 46 || le32(p) != SIG_CENTRAL) return bad(z, "a central-directory entry is cut short or has no signature");
    uint32_t flags = le16(p + 8), nl = le16(p + 28), xl = le16(p + 30), cl = le16(p + 32);
    if (46 + (size_t)nl + xl + cl > left) return bad(z, "a central-directory entry runs past the directory");
    *len = 46 + (size_t)nl + xl + cl;
    if (!(m->name = malloc((size_t)nl + 1))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", z->path);
    memcpy(m->name, p + 46, nl), m->name[nl] = '\0';
    char q[TSC_IMPORT_QUOTE_MAX];
    if (strlen(m->name) != nl)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: a NUL byte in the name", z->path, tsc_import_quote(m->name, q));
    m->method = (int)le16(p + 10), m->crc = le32(p + 16);
    m->csize = le32(p + 20), m->usize = le32(p + 24);
    uint64_t local = le32(p + 42);
    if (flags & 1)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s is encrypted", z->path, tsc_import_quote(m->name, q));
    if (m->method != 0 && m->method != 8)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: compression method %d (only stored and deflate are read)", z->path,
                             tsc_import_quote(m->name, q), m->method);
    if (le16(p + 34)) return bad(z, "a member on another disk");
    if (zip64_extra(p + 46 + nl, xl, &m->usize, &m->csize, &local))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: ZIP64 sizes without their extra field", z->path,
                             tsc_import_quote(m->name, q));
    if (m->method == 0 && m->csize != m->usize)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s is stored, yet its sizes differ (%llu, %llu)", z->path,
                             tsc_import_quote(m->name, q), (unsigned long long)m->csize, (unsigned long long)m->usize);
    m->data = local; /* the local header's offset until resolve_local */
    return TSC_OK;
}

/* The data offset of member m from its local header, inside [0, limit). */
static tsc_status_t resolve_local(tsc_zip_t *z, tsc_zip_member_t *m, uint64_t limit) {
    unsigned char h[30];
    char q[TSC_IMPORT_QUOTE_MAX];
    if (m->data > limit || limit - m->data < 30 || tsc_import_pread(z->fd, z->path, h, 30, m->data, "a zip local header") ||
        le32(h) != SIG_LOCAL)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: no local header at offset %llu", z->path,
                             tsc_import_quote(m->name, q), (unsigned long long)m->data);
    uint64_t d = m->data + 30 + le16(h + 26) + le16(h + 28);
    if (d > limit || limit - d < m->csize)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: its %llu bytes run past the archive's data (truncated or forged)",
                             z->path, tsc_import_quote(m->name, q), (unsigned long long)m->csize);
    m->data = d;
    return TSC_OK;
}

static tsc_status_t check_members(tsc_zip_t *z, uint64_t cd_off) {
    char q[TSC_IMPORT_QUOTE_MAX];
    for (int i = 0; i < z->n; i++)
        if (resolve_local(z, &z->m[i], cd_off)) return TSC_ERR_FORMAT;
    int *ix = malloc(sizeof *ix * (size_t)(z->n + 1));
    if (!ix || !(z->by_name = malloc(sizeof *z->by_name * (size_t)(z->n + 1))))
        return free(ix), tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", z->path);
    for (int i = 0; i < z->n; i++) ix[i] = z->by_name[i] = i;
    sort_z = z;
    qsort(z->by_name, (size_t)z->n, sizeof *ix, cmp_member_name);
    qsort(ix, (size_t)z->n, sizeof *ix, cmp_member_data);
    tsc_status_t st = TSC_OK;
    for (int i = 1; i < z->n && !st; i++)
        if (!strcmp(z->m[z->by_name[i]].name, z->m[z->by_name[i - 1]].name))
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s appears twice", z->path, tsc_import_quote(z->m[z->by_name[i]].name, q));
    /* Overlapping members are how a small archive inflates to many times its size: refused. */
    for (int i = 1; i < z->n && !st; i++) {
        const tsc_zip_member_t *a = &z->m[ix[i - 1]], *b = &z->m[ix[i]];
        if (b->data < a->data + a->csize)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: zip members %s and %s share bytes (an overlapping archive)", z->path,
                               tsc_import_quote(a->name, q), tsc_import_quote(b->name, q));
    }
    free(ix);
    return st;
}

tsc_status_t tsc_zip_open(tsc_zip_t *z, int fd, uint64_t size, const char *path) {
    memset(z, 0, sizeof *z);
    z->path = path, z->fd = fd;
    uint64_t entries = 0, cd_size = 0, cd_off = 0, cd_end = 0;
    tsc_status_t st = find_directory(z, size, &entries, &cd_size, &cd_off, &cd_end);
    if (st) return st;
    if (cd_off > cd_end || cd_size > cd_end - cd_off) return bad(z, "the central directory lies outside the file");
    if (entries > cd_size / 46 || entries > ZIP_MEMBERS_MAX) return bad(z, "more entries than the central directory can hold");
    if ((st = tsc_mem_check(cd_size + entries * (sizeof *z->m + 64), "the zip archive's directory"))) return st;
    unsigned char *cd = malloc(cd_size ? (size_t)cd_size : 1);
    z->m = calloc((size_t)entries + 1, sizeof *z->m);
    if (!cd || !z->m) return free(cd), tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    st = tsc_import_pread(fd, path, cd, cd_size, cd_off, "the zip central directory");
    size_t pos = 0, len = 0;
    for (uint64_t i = 0; !st && i < entries; i++, pos += len, z->n++) /* counted even on failure: close frees the name */
        st = parse_entry(z, cd + pos, (size_t)cd_size - pos, &z->m[i], &len);
    free(cd);
    if (!st) st = check_members(z, cd_off);
    return st;
}

void tsc_zip_close(tsc_zip_t *z) {
    if (!z) return;
    for (int i = 0; z->m && i < z->n; i++) free(z->m[i].name);
    free(z->m), free(z->by_name);
    memset(z, 0, sizeof *z);
}

int tsc_zip_find(const tsc_zip_t *z, const char *name) {
    int lo = 0, hi = z->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(z->m[z->by_name[mid]].name, name);
        if (!c) return z->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* Inflates member m from its start: the first off bytes are discarded, the next n land in buf. When
 * the read reaches the end, the stream must end there too and the CRC must match. */
static tsc_status_t inflate_range(const tsc_zip_t *z, const tsc_zip_member_t *m, uint64_t off, uint64_t n, unsigned char *buf) {
    char q[TSC_IMPORT_QUOTE_MAX];
    unsigned char *in = malloc(CHUNK), *scratch = malloc(CHUNK);
    z_stream s;
    memset(&s, 0, sizeof s);
    if (!in || !scratch || inflateInit2(&s, -MAX_WBITS) != Z_OK)
        return free(in), free(scratch), tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory inflating", z->path);
    uint64_t fed = 0, out = 0, end = off + n;
    int to_end = end == m->usize, zr = Z_OK;
    uLong crc = crc32(0L, Z_NULL, 0);
    tsc_status_t st = TSC_OK;
    while (!st && (out < end || to_end)) {
        if (!s.avail_in && fed < m->csize) {
            uInt k = m->csize - fed > CHUNK ? CHUNK : (uInt)(m->csize - fed);
            if ((st = tsc_import_pread(z->fd, z->path, in, k, m->data + fed, "a compressed zip member"))) break;
            s.next_in = in, s.avail_in = k, fed += k;
        }
        /* Output: the discarded prefix into scratch, the wanted range into buf, then (reading to the
         * end) one more byte of scratch that must stay empty. */
        unsigned char *dst = out < off ? scratch : out < end ? buf + (out - off) : scratch;
        uint64_t room = out < off ? off - out : out < end ? end - out : 1;
        s.next_out = dst, s.avail_out = room > CHUNK ? CHUNK : (uInt)room;
        uInt before = s.avail_out;
        zr = inflate(&s, Z_NO_FLUSH);
        uInt got = before - s.avail_out;
        if (out >= end && got) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s inflates past its declared %llu bytes", z->path,
                               tsc_import_quote(m->name, q), (unsigned long long)m->usize);
            break;
        }
        if (to_end) crc = crc32(crc, dst, got);
        out += got;
        if (zr == Z_STREAM_END) {
            if (out < end)
                st = tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s inflates to %llu bytes, %llu declared", z->path,
                                   tsc_import_quote(m->name, q), (unsigned long long)out, (unsigned long long)m->usize);
            break;
        }
        if (zr != Z_OK && !(zr == Z_BUF_ERROR && (s.avail_in || fed < m->csize)))
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: corrupt deflate data (%s)", z->path, tsc_import_quote(m->name, q),
                               s.msg ? s.msg : zr == Z_BUF_ERROR ? "the data ends early" : "zlib error");
    }
    if (!st && to_end && crc != m->crc)
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s: CRC mismatch (the data is damaged)", z->path, tsc_import_quote(m->name, q));
    inflateEnd(&s);
    free(in), free(scratch);
    return st;
}

tsc_status_t tsc_zip_read(const tsc_zip_t *z, int i, uint64_t off, uint64_t n, void *buf) {
    const tsc_zip_member_t *m = &z->m[i];
    char q[TSC_IMPORT_QUOTE_MAX];
    if (off > m->usize || n > m->usize - off)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: zip member %s holds %llu bytes, [%llu, +%llu) asked for", z->path,
                             tsc_import_quote(m->name, q), (unsigned long long)m->usize, (unsigned long long)off,
                             (unsigned long long)n);
    if (m->method == 0) return tsc_import_pread(z->fd, z->path, buf, n, m->data + off, "a zip member");
    return inflate_range(z, m, off, n, buf);
}
