/* RMSNorm of float32 rows, optionally after adding a residual: the norms of a decode
 * step on CPU, where torch's own rms_norm costs ~20-35 us per call on a short row.
 *
 * Each row: the mean of its squares summed in double, one float32 factor
 * 1 / sqrt(mean + eps), then (x * factor) * weight in float32, so a row's result does
 * not depend on the other rows. */

#ifndef STRUCTGEN_RMS_NORM_ROWS_H
#define STRUCTGEN_RMS_NORM_ROWS_H

#include <math.h>
#include <stdint.h>

/* out[i] = rms_norm(x[i]) * weight for n rows of k; with `delta` non-null, x[i] is first
 * replaced by total[i] = x[i] + delta[i] (total may be written where x is read). */
static void rms_norm_rows(const float *x, const float *delta, float *total, const float *weight, float *out,
                          int64_t n, int64_t k, double eps) {
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * k;
        if (delta) {
            float *sum = total + i * k;
            for (int64_t j = 0; j < k; j++) sum[j] = row[j] + delta[i * k + j];
            row = sum;
        }
        double squares = 0;
        for (int64_t j = 0; j < k; j++) squares += (double)row[j] * (double)row[j];
        float factor = (float)(1.0 / sqrt(squares / (double)k + eps));
        float *dst = out + i * k;
        for (int64_t j = 0; j < k; j++) dst[j] = (row[j] * factor) * weight[j];
    }
}

#endif
