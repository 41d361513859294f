/* Colour maps and norms against published reference values and derived properties. */
#include "tsc_test.h"
#include "tsc_colormap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Moreland's published cool-warm table, 33 points (t, r, g, b), "CoolWarmFloat33" from
 * "Diverging Color Maps for Scientific Visualization" (the table matplotlib's coolwarm uses). */
static const double coolwarm33[33][4] = {
    {0, 0.2298057, 0.298717966, 0.753683153},
    {0.03125, 0.26623388, 0.353094838, 0.801466763},
    {0.0625, 0.30386891, 0.406535296, 0.84495867},
    {0.09375, 0.342804478, 0.458757618, 0.883725899},
    {0.125, 0.38301334, 0.50941904, 0.917387822},
    {0.15625, 0.424369608, 0.558148092, 0.945619588},
    {0.1875, 0.46666708, 0.604562568, 0.968154911},
    {0.21875, 0.509635204, 0.648280772, 0.98478814},
    {0.25, 0.552953156, 0.688929332, 0.995375608},
    {0.28125, 0.596262162, 0.726149107, 0.999836203},
    {0.3125, 0.639176211, 0.759599947, 0.998151185},
    {0.34375, 0.681291281, 0.788964712, 0.990363227},
    {0.375, 0.722193294, 0.813952739, 0.976574709},
    {0.40625, 0.761464949, 0.834302879, 0.956945269},
    {0.4375, 0.798691636, 0.849786142, 0.931688648},
    {0.46875, 0.833466556, 0.860207984, 0.901068838},
    {0.5, 0.865395197, 0.86541021, 0.865395561},
    {0.53125, 0.897787179, 0.848937047, 0.820880546},
    {0.5625, 0.924127593, 0.827384882, 0.774508472},
    {0.59375, 0.944468518, 0.800927443, 0.726736146},
    {0.625, 0.958852946, 0.769767752, 0.678007945},
    {0.65625, 0.96732803, 0.734132809, 0.628751763},
    {0.6875, 0.969954137, 0.694266682, 0.579375448},
    {0.71875, 0.966811177, 0.650421156, 0.530263762},
    {0.75, 0.958003065, 0.602842431, 0.481775914},
    {0.78125, 0.943660866, 0.551750968, 0.434243684},
    {0.8125, 0.923944917, 0.49730856, 0.387970225},
    {0.84375, 0.89904617, 0.439559467, 0.343229596},
    {0.875, 0.869186849, 0.378313092, 0.300267182},
    {0.90625, 0.834620542, 0.312874446, 0.259301199},
    {0.9375, 0.795631745, 0.24128379, 0.220525627},
    {0.96875, 0.752534934, 0.157246067, 0.184115123},
    {1, 0.705673158, 0.01555616, 0.150232812},
};

/* Our cool-warm is computed from Moreland's Msh endpoints, not copied from his table; his table
 * rounds RGB through a slightly different sRGB matrix. 2e-3 is a quarter of an 8-bit step. */
#define COOLWARM_TOL 2e-3
/* The viridis table is stored with the published 6 decimals: only float storage error remains. */
#define VIRIDIS_TOL 1e-6

static double srgb_lin(double c) { return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4); }
/* CIELAB L* of an sRGB colour (D65), computed independently of the library. */
static double lstar(const double rgb[3]) {
    double y = 0.2126729 * srgb_lin(rgb[0]) + 0.7151522 * srgb_lin(rgb[1]) + 0.0721750 * srgb_lin(rgb[2]);
    return y > 0.008856 ? 116 * cbrt(y) - 16 : 903.3 * y;
}

int main(void) {
    double rgb[3];
    /* Cool-warm against Moreland's table. */
    double worst = 0;
    for (int i = 0; i < 33; i++) {
        tsc_cmap_eval(TSC_CMAP_COOLWARM, coolwarm33[i][0], rgb);
        for (int c = 0; c < 3; c++) worst = fmax(worst, fabs(rgb[c] - coolwarm33[i][c + 1]));
    }
    CHECKF(worst <= COOLWARM_TOL, "cool-warm max |diff| vs Moreland's table %g", worst);
    /* Published 8-bit endpoints: blue (59, 76, 192), red (180, 4, 38), centre (221, 221, 221). */
    uint32_t lo = tsc_cmap_argb(TSC_CMAP_COOLWARM, 0), hi = tsc_cmap_argb(TSC_CMAP_COOLWARM, 1);
    uint32_t mid = tsc_cmap_argb(TSC_CMAP_COOLWARM, 0.5);
    CHECK_EQ_U32(lo, 0xFF3B4CC0u);   /* exactly Moreland's 8-bit values */
    CHECK_EQ_U32(hi, 0xFFB40426u);
    CHECK_EQ_U32(mid, 0xFFDDDDDDu);
    CHECK((lo >> 24) == 255 && (hi >> 24) == 255);
    /* Perceptual balance: L*(t) = L*(1 - t), rising to the centre. */
    double worst_sym = 0, prev = -1;
    int mono = 1;
    for (int i = 0; i <= 100; i++) {
        double a[3], b[3];
        tsc_cmap_eval(TSC_CMAP_COOLWARM, i / 200.0, a);
        tsc_cmap_eval(TSC_CMAP_COOLWARM, 1 - i / 200.0, b);
        worst_sym = fmax(worst_sym, fabs(lstar(a) - lstar(b)));
        if (lstar(a) < prev - 1e-9) mono = 0;
        prev = lstar(a);
    }
    CHECKF(worst_sym < 1.0, "cool-warm L* asymmetry %g", worst_sym); /* 1 L* unit: below visibility */
    CHECK(mono);

    /* Viridis: published endpoints #440154 and #fde725, and table entries at t = i / 255. */
    CHECK_EQ_U32(tsc_cmap_argb(TSC_CMAP_VIRIDIS, 0), 0xFF440154u);
    CHECK_EQ_U32(tsc_cmap_argb(TSC_CMAP_VIRIDIS, 1), 0xFFFDE725u);
    tsc_cmap_eval(TSC_CMAP_VIRIDIS, 127 / 255.0, rgb);  /* published entry 127: 0.128729 0.563265 0.551229 */
    CHECK_NEAR(rgb[0], 0.128729, VIRIDIS_TOL);
    CHECK_NEAR(rgb[1], 0.563265, VIRIDIS_TOL);
    CHECK_NEAR(rgb[2], 0.551229, VIRIDIS_TOL);
    /* Halfway between entries 0 and 1 (0.267004 0.004874 0.329415 / 0.268510 0.009605 0.335427). */
    tsc_cmap_eval(TSC_CMAP_VIRIDIS, 0.5 / 255.0, rgb);
    CHECK_NEAR(rgb[1], (0.004874 + 0.009605) / 2, VIRIDIS_TOL);
    /* Viridis lightness increases monotonically. */
    mono = 1; prev = -1;
    for (int i = 0; i <= 255; i++) {
        tsc_cmap_eval(TSC_CMAP_VIRIDIS, i / 255.0, rgb);
        if (lstar(rgb) <= prev) mono = 0;
        prev = lstar(rgb);
    }
    CHECK(mono);
    /* Clipping, NaN, LUT. */
    CHECK_EQ_U32(tsc_cmap_argb(TSC_CMAP_VIRIDIS, -3), 0xFF440154u);
    CHECK_EQ_U32(tsc_cmap_argb(TSC_CMAP_VIRIDIS, 7), 0xFFFDE725u);
    CHECK_EQ_U32(tsc_cmap_argb(TSC_CMAP_VIRIDIS, NAN), TSC_CMAP_BAD_ARGB);
    uint32_t lut[TSC_CMAP_LUT_N];
    tsc_cmap_fill_lut(TSC_CMAP_GREYS, lut, TSC_CMAP_LUT_N);
    CHECK_EQ_U32(lut[0], 0xFFFFFFFFu);
    CHECK_EQ_U32(lut[TSC_CMAP_LUT_N - 1], 0xFF000000u);
    tsc_cmap_t cm;
    CHECK(tsc_cmap_parse("CoolWarm", &cm) == TSC_OK && cm == TSC_CMAP_COOLWARM);
    CHECK(tsc_cmap_parse("jet", &cm) == TSC_ERR_ARG && strstr(tsc_error_last(), "jet"));

    /* Norms. */
    tsc_norm_t n;
    CHECK(tsc_norm_init(&n, TSC_NORM_LINEAR, 2, 6) == TSC_OK);
    CHECK_NEAR(tsc_norm_apply(&n, 3), 0.25, 1e-15);
    CHECK_NEAR(tsc_norm_apply(&n, -9), 0, 0);
    CHECK_NEAR(tsc_norm_apply(&n, 99), 1, 0);
    CHECK(isnan(tsc_norm_apply(&n, NAN)) && isnan(tsc_norm_apply(&n, INFINITY)));
    CHECK_NEAR(tsc_norm_inverse(&n, 0.75), 5, 1e-15);
    CHECK(tsc_norm_init(&n, TSC_NORM_LOG, 1e-6, 1) == TSC_OK);
    CHECK_NEAR(tsc_norm_apply(&n, 1e-3), 0.5, 1e-12);   /* geometric midpoint */
    CHECK_NEAR(tsc_norm_apply(&n, 1e-4), 1.0 / 3, 1e-12);
    CHECK_NEAR(tsc_norm_apply(&n, 0), 0, 0);
    CHECK_NEAR(tsc_norm_inverse(&n, 0.5), 1e-3, 1e-15);
    CHECK(tsc_norm_init(&n, TSC_NORM_LOG, 0, 1) == TSC_ERR_ARG);
    CHECK(tsc_norm_init(&n, TSC_NORM_LINEAR, 1, 1) == TSC_ERR_ARG);
    CHECK(tsc_norm_init(&n, TSC_NORM_LINEAR, NAN, 1) == TSC_ERR_ARG);
    CHECK(tsc_norm_init(&n, TSC_NORM_SYMMETRIC, -1, 4) == TSC_OK && n.vmin == -4 && n.vmax == 4);
    CHECK_NEAR(tsc_norm_apply(&n, 0), 0.5, 0);
    CHECK_NEAR(tsc_norm_apply(&n, -2), 0.25, 1e-15);

    float x[6] = {0.5f, -3.0f, NAN, 2.0f, INFINITY, 100.0f};
    uint8_t mask[6] = {0, 0, 0, 0, 0, 1};
    CHECK(tsc_norm_autoscale(&n, TSC_NORM_LINEAR, x, 6, mask) == TSC_OK);
    CHECK(n.vmin == -3 && n.vmax == 2);
    CHECK(tsc_norm_autoscale(&n, TSC_NORM_SYMMETRIC, x, 6, mask) == TSC_OK);
    CHECK(n.vmin == -3 && n.vmax == 3);
    CHECK(tsc_norm_autoscale(&n, TSC_NORM_LOG, x, 6, mask) == TSC_OK);
    CHECK(n.vmin == 0.5 && n.vmax == 2);
    CHECK(tsc_norm_autoscale(&n, TSC_NORM_LOG, x, 1, NULL) == TSC_OK);  /* one value: widened a decade each way */
    CHECK_NEAR(n.vmin, 0.05, 1e-15);
    CHECK_NEAR(n.vmax, 5, 1e-15);
    CHECK(tsc_norm_autoscale(&n, TSC_NORM_LINEAR, x + 2, 1, NULL) == TSC_OK);  /* only NaN */
    CHECK(n.vmin == 0 && n.vmax == 1);
    tsc_norm_t a = {TSC_NORM_SYMMETRIC, -1, 1}, b = {TSC_NORM_SYMMETRIC, -0.5, 0.5};
    b.vmin = -3; b.vmax = 3;
    tsc_norm_union(&a, &b);
    CHECK(a.vmin == -3 && a.vmax == 3);

    /* Ticks. */
    double t[16];
    CHECK(tsc_norm_init(&n, TSC_NORM_LINEAR, 0, 1) == TSC_OK);
    int k = tsc_norm_ticks(&n, t, 6);
    CHECK_EQ_INT(k, 6);
    CHECK(k == 6 && t[0] == 0 && fabs(t[1] - 0.2) < 1e-12 && fabs(t[5] - 1) < 1e-12);
    CHECK(tsc_norm_init(&n, TSC_NORM_SYMMETRIC, -0.037, 0.037) == TSC_OK);
    k = tsc_norm_ticks(&n, t, 7);
    int has0 = 0;
    for (int i = 0; i < k; i++) has0 |= t[i] == 0;
    CHECK(k >= 3 && k <= 7 && has0 && t[0] >= -0.037 && t[k - 1] <= 0.037);
    CHECK(tsc_norm_init(&n, TSC_NORM_LOG, 1e-4, 1) == TSC_OK);
    k = tsc_norm_ticks(&n, t, 8);
    CHECK(k == 5 && fabs(t[0] - 1e-4) < 1e-18 && t[4] == 1);
    CHECK(tsc_norm_init(&n, TSC_NORM_LOG, 1e-12, 1) == TSC_OK);
    k = tsc_norm_ticks(&n, t, 6);
    CHECK(k >= 2 && k <= 6 && fabs(t[0] - 1e-12) < 1e-24);
    CHECK(tsc_norm_init(&n, TSC_NORM_LOG, 0.3, 4) == TSC_OK);
    k = tsc_norm_ticks(&n, t, 8);
    CHECK(k >= 2 && t[0] >= 0.3 && t[k - 1] <= 4);
    char buf[32];
    tsc_format_tick(0.25, 0.05, buf, sizeof buf); CHECK_STREQ(buf, "0.25");
    tsc_format_tick(-3, 1, buf, sizeof buf); CHECK_STREQ(buf, "-3");
    tsc_format_tick(1e-5, 0, buf, sizeof buf); CHECK_STREQ(buf, "1e-5");
    tsc_format_tick(2e4, 5e3, buf, sizeof buf); CHECK_STREQ(buf, "20000");
    tsc_format_tick(2.5e-5, 5e-6, buf, sizeof buf); CHECK_STREQ(buf, "2.5e-5");
    tsc_format_tick(0, 0.1, buf, sizeof buf); CHECK_STREQ(buf, "0");
    return tsc_test_done();
}
