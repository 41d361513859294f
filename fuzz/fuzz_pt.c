/* fuzz_pt.c: the input as a torch .pt file (a zip archive with data.pkl and its storages, or the
 * legacy sequence of pickles and storage records): hostile input to `tilescope import`, through the
 * zip reader (capture/import_zip.c), the restricted unpickler (capture/import_pickle.c) and the
 * storage and view checks (capture/import_read.c). Checks: fuzz_tensor_file.h. */
#include "fuzz_tensor_file.h"

TSC_FUZZ_TARGET(pt) { return tsc_fuzz_tensor_file(data, size, ".pt", 0); }
