/* What the engine's C kernels share about the CPU: whether AVX2 with FMA and F16C may be used
 * (SIMD_HAVE_AVX2 at compile time, simd_use_avx2() at run time) and the one order in
 * which eight float lanes are summed (simd_lane_sum; the kernels' portable paths add
 * their lanes in the same order: (l + l+4), then (0+2) + (1+3)). */

#ifndef STRUCTGEN_SIMD_H
#define STRUCTGEN_SIMD_H

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SIMD_HAVE_AVX2 1

static int simd_use_avx2(void) {
    static int checked = -1;
    if (checked < 0) {
        __builtin_cpu_init();
        checked = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    }
    return checked;
}

__attribute__((target("avx2,fma"))) static inline float simd_lane_sum(__m256 t) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)); /* l + (l + 4) */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                         /* (0+2), (1+3) */
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#else
#define SIMD_HAVE_AVX2 0
#endif

/* The same sum of eight lanes, for the portable paths. */
static inline float simd_lane_sum_portable(const float lane[8]) {
    float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5], s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
    return (s0 + s2) + (s1 + s3);
}

#endif
