/* Placeholder translation unit for a layer with no sources yet. */
typedef int tsc_empty_layer_t;
