/* fuzz_npz.c: the input as an .npz (a zip archive of .npy members, stored or deflated): hostile
 * input to `tilescope import`, through the zip reader's directory checks and bounded inflation
 * (capture/import_zip.c) and the npy header parser. Checks: fuzz_tensor_file.h. */
#include "fuzz_tensor_file.h"

TSC_FUZZ_TARGET(npz) { return tsc_fuzz_tensor_file(data, size, ".npz", 0); }
