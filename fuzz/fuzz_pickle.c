/* fuzz_pickle.c: the input as a pickle run by the restricted unpickler (capture/import_pickle.c)
 * directly, without a file around it, so every execution is spent in the interpreter: the first
 * byte picks what it is read as (the object pickle, the legacy key list, or a legacy header
 * pickle). An accepted object pickle must name only tensors whose storage exists and whose rank
 * is at most 16; any refusal must name the pickle. */
#include "fuzz_target.h"

#include "import_internal.h"

TSC_FUZZ_TARGET(pickle) {
    if (!size) return 0;
    int kind = data[0] % 5;
    tsc_pt_objects_t o;
    tsc_pt_keys_t k;
    size_t used;
    tsc_status_t st = tsc_pt_unpickle(data + 1, size - 1, "fuzz.pkl", kind, &o, &k, &used);
    if (st) {
        TSC_FUZZ_CHECK(strstr(tsc_error_last(), "fuzz.pkl") != NULL, "the error does not name the pickle: %s", tsc_error_last());
        return 0;
    }
    TSC_FUZZ_CHECK(used != (size_t)-1 && used <= size - 1, "used %zu of %zu bytes", used, size - 1);
    if (kind == TSC_PT_OBJECTS) {
        for (int i = 0; i < o.n_tensor; i++) {
            TSC_FUZZ_CHECK(o.tensor[i].storage >= 0 && o.tensor[i].storage < o.n_storage, "tensor %d: storage %d of %d", i,
                           o.tensor[i].storage, o.n_storage);
            TSC_FUZZ_CHECK(o.tensor[i].rank >= 0 && o.tensor[i].rank <= TSC_TENSOR_RANK_MAX, "tensor %d: rank %d", i, o.tensor[i].rank);
            TSC_FUZZ_CHECK(o.tensor[i].name != NULL, "tensor %d has no name", i);
        }
        tsc_pt_objects_free(&o);
    }
    if (kind == TSC_PT_KEYS) tsc_pt_keys_free(&k);
    return 0;
}
