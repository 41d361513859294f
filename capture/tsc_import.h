/* tsc_import.h: tensors other programs saved, read and written into a dump (`tilescope import`).
 *
 * Readers (tsc_tensor_file_*): .safetensors (an 8-byte little-endian header length, a JSON header
 * {name: {dtype, shape, data_offsets [begin, end)}, "__metadata__": {string: string}}, then the raw
 * little-endian bytes; offsets count from the byte after the header), .npy (magic "\x93NUMPY",
 * versions 1-3, a Python dict literal {'descr', 'fortran_order', 'shape'}, then the raw bytes),
 * .npz (a zip archive of .npy members, stored or deflated) and torch.save files (.pt .pth .bin: the
 * zip archive PREFIX/data.pkl + PREFIX/data/KEY, or the legacy pickle stream), whose pickle is
 * interpreted by a restricted unpickler that calls nothing (docs/SECURITY.md lists what it accepts).
 * Stored types: safetensors F64 F32 F16 BF16 (BF16 kept as its bits), npy '<f8' '<f4' '<f2', torch
 * Double/Float/Half/BFloat16 storages (other torch and npz types are listed as "other"); any
 * other type is refused naming it and the tensor (an npy uint16 is refused too: numpy has no bf16,
 * and uint16 may hold integers; save BF16 tensors as safetensors or torch .pt). Every file is
 * hostile: the whole header is checked at open (length against the file and a 100 MB cap, strict
 * JSON, no duplicate names, dtype, shape, size == product(shape) * element size without overflow,
 * offsets inside the data region, no overlapping tensors, file long enough); tensor data is read
 * one tensor at a time (tsc_tensor_file_read), never the whole file. Errors are TSC_ERR_FORMAT
 * (TSC_ERR_IO for open/read failures) naming the file and, where one is at fault, the tensor.
 *
 *   tsc_tensor_file_t *f;
 *   tsc_tensor_file_open(&f, "attn.safetensors");
 *   for (int i = 0; i < tsc_tensor_file_count(f); i++) {
 *       const tsc_tensor_info_t *t = tsc_tensor_file_info(f, i);   // name, fmt, rank, dims, nbytes
 *       tsc_tensor_file_read(f, i, buf);                             // t->nbytes bytes
 *   }
 *   tsc_tensor_file_close(f);
 *
 * Import (tsc_import_run): maps tensor names onto (step, layer, dataset) and writes them through
 * the capture API (tsc_capture.h). A map is "PATTERN" or "PATTERN=NAME": PATTERN matches the whole
 * tensor name, with {step} and {layer} matching decimal integers, {name} a dataset name (q k v o do
 * lse x w_q w_k w_v w_o) and * anything but a newline; =NAME gives the dataset when PATTERN has no
 * {name}. The first map that matches wins; tensors no map matches are reported as skipped. Without
 * {step} the step is opts.step, without {layer} the layer is 0. Defaults (no maps): "{name}",
 * "step_{step}/layer_{layer}/{name}", "layer{layer}.{name}", "layers.{layer}.{name}". The geometry
 * comes from the tensors: q [B, H, T, D] of the first (step, layer) with a q, k of the same (step,
 * layer) for the kv heads (else H), x [B, T, C] for d_model (else H*D); with layout_bthd, q k v o
 * do are [B, T, H, D] in the file. The dump is written to a temporary name and renamed: a failed
 * import leaves no output behind. The same syntax and rules as python3 -m tilescope import.
 */
#ifndef TSC_IMPORT_H
#define TSC_IMPORT_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_json.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_TENSOR_RANK_MAX 16
/* The largest safetensors JSON header (the format's own readers cap it at 100 MB too). */
#define TSC_TENSOR_HEADER_MAX (100u * 1000u * 1000u)

typedef struct {
    const char *name;   /* the tensor's name (UTF-8, no NUL inside; a .npy: the file name's stem) */
    const char *dtype;  /* as the file spells it: "BF16", "<f4", ... */
    tsc_format_t fmt;   /* TSC_FMT_FP64, _FP32, _FP16 or _BF16 */
    int rank;
    uint64_t dims[TSC_TENSOR_RANK_MAX];
    uint64_t offset;    /* of the first byte, from the start of the file; UINT64_MAX when the bytes are
                         * not one plain range of it (a deflated .npz member, a strided torch view) */
    uint64_t nbytes;    /* product(dims) * tsc_format_size(fmt) */
} tsc_tensor_info_t;

typedef struct tsc_tensor_file tsc_tensor_file_t;

/* The extensions read, space-separated (".safetensors .npy .npz .pt .pth .bin"): one table in
 * import_read.c, which the CLI's routing, help and messages derive from. */
TSC_API const char *tsc_tensor_file_types(void);
/* 1 when path's extension is one of them. */
TSC_API int tsc_tensor_file_known(const char *path);
/* Opens path and checks its whole header; the kind comes from the extension (TSC_ERR_UNSUPPORTED
 * for one not in tsc_tensor_file_types). On failure *out is NULL. */
TSC_API tsc_status_t tsc_tensor_file_open(tsc_tensor_file_t **out, const char *path);
TSC_API void tsc_tensor_file_close(tsc_tensor_file_t *f);
TSC_API const char *tsc_tensor_file_path(const tsc_tensor_file_t *f);
/* Tensors in the order of the file's header. */
TSC_API int tsc_tensor_file_count(const tsc_tensor_file_t *f);
TSC_API const tsc_tensor_info_t *tsc_tensor_file_info(const tsc_tensor_file_t *f, int i);
/* Tensors of a type tilescope does not store (a torch LongStorage buffer, an int64 .npz array, an
 * .npz member that is not an array): name, dtype and shape only; never read. */
TSC_API int tsc_tensor_file_other_count(const tsc_tensor_file_t *f);
TSC_API const tsc_tensor_info_t *tsc_tensor_file_other(const tsc_tensor_file_t *f, int i);
/* Reads tensor i's nbytes bytes (little-endian as stored) into buf. TSC_ERR_IO naming the file when
 * the read fails or comes up short (the file shrank since open). */
TSC_API tsc_status_t tsc_tensor_file_read(tsc_tensor_file_t *f, int i, void *buf);
/* {"path", "tensors": [{"name", "dtype", "format", "shape", "offset", "nbytes"}], "other": [{"name",
 * "dtype", "shape"}]}, for bindings (offset -1: not one plain byte range of the file). */
TSC_API void tsc_tensor_file_json(const tsc_tensor_file_t *f, tsc_json_t *j);

typedef struct {
    const char *const *maps; /* n_maps map strings; NULL or 0 = the defaults above */
    int n_maps;
    long long step;          /* the step of tensors whose map has no {step} (default 0) */
    int causal;              /* 1 (default): the attention had a causal mask */
    double scale;            /* softmax scale; 0 (default) = 1/sqrt(D) */
    const char *policy;      /* recorded in the dump; NULL or "" = none */
    int layout_bthd;         /* 1: q k v o do are [B, T, H, D] in the file */
    const char *producer;    /* NULL = "tilescope import (<file name>)" */
} tsc_import_opts_t;

typedef struct {
    int n_datasets;
    int n_steps, n_layers;
    long long *steps;        /* ascending */
    int *layers;             /* ascending */
    int n_skipped;
    char **skipped;          /* tensor names no map selects, sorted (bytewise) */
} tsc_import_result_t;

TSC_API void tsc_import_opts_init(tsc_import_opts_t *o);
/* Parses one map string: TSC_ERR_ARG "map 'M': ..." when NAME is no dataset name or the pattern
 * has neither {name} nor =NAME. (tsc_import_run checks every map first too.) */
TSC_API tsc_status_t tsc_import_map_check(const char *map);
/* The default maps (used when opts.maps is empty), for help texts and bindings: *n of them, static. */
TSC_API const char *const *tsc_import_default_maps(int *n);
/* sizeof(tsc_import_opts_t), for a binding that mirrors the struct to check its layout against. */
TSC_API size_t tsc_import_opts_size(void);
/* Imports src (.safetensors or .npy) into the dump out. res may be NULL; else *res is allocated
 * (tsc_import_result_free). Errors name src and the tensor at fault (TSC_ERR_SHAPE for a shape
 * that contradicts q or the layout). */
TSC_API tsc_status_t tsc_import_run(const char *src, const char *out, const tsc_import_opts_t *o,
                                    tsc_import_result_t **res);
TSC_API void tsc_import_result_free(tsc_import_result_t *r);
/* {"path", "datasets", "steps", "layers", "skipped"} (what the Python package's import_tensors returns). */
TSC_API void tsc_import_result_json(const tsc_import_result_t *r, const char *out, tsc_json_t *j);

#ifdef __cplusplus
}
#endif
#endif
