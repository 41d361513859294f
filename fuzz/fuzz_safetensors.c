/* fuzz_safetensors.c: the input as a tensor file (a .safetensors or .npy someone saved: hostile input
 * to `tilescope import`). Inputs starting with the npy magic "\x93NUMPY" are written as .npy, others
 * as .safetensors; the checks are fuzz_tensor_file.h's (no two safetensors tensors overlap, too).
 */
#include "fuzz_tensor_file.h"

TSC_FUZZ_TARGET(safetensors) {
    int npy = size >= 6 && !memcmp(data, "\x93NUMPY", 6);
    return tsc_fuzz_tensor_file(data, size, npy ? ".npy" : ".safetensors", 1);
}
