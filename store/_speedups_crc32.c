/* store._speedups: CRC-32 (the crc32 entry point, and fast_crc's folds for every other file).
 * Reference: zlib.crc32, which store.speedups.crc32 is where the module is not built; its
 * answer is this one's bit for bit. tests/file/test_speedups.py compares them.
 *
 * zlib's CRC-32 (reflected polynomial 0xEDB88320, zlib's answer bit for bit), used for every
 * record the journal writes or reads. Debian's zlib computes it a byte-braid at a time, about
 * 2.7 GB/s here: a third of a 1 KiB append. On x86-64 CPUs with PCLMULQDQ the bulk of a buffer
 * of 64 bytes or more is folded with carry-less multiplications instead, four 128-bit lanes at
 * a time, then folded to one lane, to 64 bits and Barrett-reduced to 32 (Gopal et al., "Fast
 * CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel, 2009; the
 * constants are the bit-reflected ones of its appendix for this polynomial). What is left (under
 * 16 bytes) goes through zlib. tests/file/test_speedups.py compares both on random buffers of
 * every length up to a few KiB and on large ones, at every alignment.
 *
 * Where the CPU also has VPCLMULQDQ and AVX-512 (and the OS saves their registers), a buffer of
 * 512 bytes or more is first folded 256 bytes at a time: four 512-bit registers, each of four
 * 128-bit lanes folded 2048 bits forward per step (four carry-less multiplications in one
 * instruction), then folded into one 512-bit register, whose four lanes continue as the four
 * lanes of the 128-bit loop. The constants of a fold D bits forward are x^(D+32) and x^(D-32)
 * modulo the polynomial, bit-reflected and shifted left once (the same rule gives the 512- and
 * 128-bit constants above). Measured: 1 MiB in about a third of the 128-bit loop's time. */

#include "_speedups.h"

#ifdef HAVE_CLMUL_CODE
#include <immintrin.h>
#endif

int have_clmul = 0;
int have_vclmul = 0;

#ifdef HAVE_CLMUL_CODE
#define WIDE_MIN 512 /* below this the wide path's set-up and reduction are not worth it */

/* Folds the first m bytes of p (m a multiple of 256, at least 256; returned) into four 128-bit
 * lanes (lanes[0] the lowest address), the register ``reg`` included: the state the 128-bit
 * loop of clmul_fold would have after the same bytes. */
__attribute__((target("vpclmulqdq,avx512f,pclmul,sse4.1"))) static Py_ssize_t
wide_fold(const unsigned char *p, Py_ssize_t n, uint32_t reg, __m128i lanes[4]) {
    const __m512i k2048 = _mm512_set_epi64(
        0x1322d1430LL, 0x11542778aLL, 0x1322d1430LL, 0x11542778aLL,
        0x1322d1430LL, 0x11542778aLL, 0x1322d1430LL, 0x11542778aLL);
    const __m512i k512 = _mm512_set_epi64(
        0x01c6e41596LL, 0x0154442bd4LL, 0x01c6e41596LL, 0x0154442bd4LL,
        0x01c6e41596LL, 0x0154442bd4LL, 0x01c6e41596LL, 0x0154442bd4LL);
    __m512i x0 = _mm512_loadu_si512((const void *)(p + 0));
    __m512i x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128));
    __m512i x3 = _mm512_loadu_si512((const void *)(p + 192));
    x0 = _mm512_xor_si512(
        x0, _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)reg), 0));
    Py_ssize_t m = 256;
    while (n - m >= 256) {
        const unsigned char *q = p + m;
#define FOLD(x, k, next) \
    _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), \
                              _mm512_clmulepi64_epi128(x, k, 0x11), next, 0x96)
        x0 = FOLD(x0, k2048, _mm512_loadu_si512((const void *)(q + 0)));
        x1 = FOLD(x1, k2048, _mm512_loadu_si512((const void *)(q + 64)));
        x2 = FOLD(x2, k2048, _mm512_loadu_si512((const void *)(q + 128)));
        x3 = FOLD(x3, k2048, _mm512_loadu_si512((const void *)(q + 192)));
        m += 256;
    }
    x1 = FOLD(x0, k512, x1); /* each lane 512 bits forward, onto the next register */
    x2 = FOLD(x1, k512, x2);
    x3 = FOLD(x2, k512, x3);
#undef FOLD
    lanes[0] = _mm512_extracti32x4_epi32(x3, 0);
    lanes[1] = _mm512_extracti32x4_epi32(x3, 1);
    lanes[2] = _mm512_extracti32x4_epi32(x3, 2);
    lanes[3] = _mm512_extracti32x4_epi32(x3, 3);
    return m;
}

/* The CRC register (not inverted: the caller inverts) after folding n bytes, n a multiple of
 * 16 and at least 64. */
__attribute__((target("pclmul,sse4.1"))) uint32_t
clmul_fold(const unsigned char *p, Py_ssize_t n, uint32_t reg) {
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i a, b, c, d;
    if (have_vclmul && n >= WIDE_MIN) {
        __m128i lanes[4];
        Py_ssize_t m = wide_fold(p, n, reg, lanes);
        a = lanes[0];
        b = lanes[1];
        c = lanes[2];
        d = lanes[3];
        p += m;
        n -= m;
    } else {
        a = _mm_loadu_si128((const __m128i *)(p + 0));
        b = _mm_loadu_si128((const __m128i *)(p + 16));
        c = _mm_loadu_si128((const __m128i *)(p + 32));
        d = _mm_loadu_si128((const __m128i *)(p + 48));
        a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)reg));
        p += 64;
        n -= 64;
    }
    while (n >= 64) { /* four lanes, each folded 512 bits forward onto the next block */
        __m128i a0 = _mm_clmulepi64_si128(a, k1k2, 0x00), a1 = _mm_clmulepi64_si128(a, k1k2, 0x11);
        __m128i b0 = _mm_clmulepi64_si128(b, k1k2, 0x00), b1 = _mm_clmulepi64_si128(b, k1k2, 0x11);
        __m128i c0 = _mm_clmulepi64_si128(c, k1k2, 0x00), c1 = _mm_clmulepi64_si128(c, k1k2, 0x11);
        __m128i d0 = _mm_clmulepi64_si128(d, k1k2, 0x00), d1 = _mm_clmulepi64_si128(d, k1k2, 0x11);
        a = _mm_xor_si128(_mm_xor_si128(a0, a1), _mm_loadu_si128((const __m128i *)(p + 0)));
        b = _mm_xor_si128(_mm_xor_si128(b0, b1), _mm_loadu_si128((const __m128i *)(p + 16)));
        c = _mm_xor_si128(_mm_xor_si128(c0, c1), _mm_loadu_si128((const __m128i *)(p + 32)));
        d = _mm_xor_si128(_mm_xor_si128(d0, d1), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    /* Fold the four lanes into one (128 bits forward each time), then any 16-byte blocks. */
    __m128i next[3] = {b, c, d};
    for (int i = 0; i < 3; i++) {
        __m128i lo = _mm_clmulepi64_si128(a, k3k4, 0x00), hi = _mm_clmulepi64_si128(a, k3k4, 0x11);
        a = _mm_xor_si128(_mm_xor_si128(lo, hi), next[i]);
    }
    while (n >= 16) {
        __m128i lo = _mm_clmulepi64_si128(a, k3k4, 0x00), hi = _mm_clmulepi64_si128(a, k3k4, 0x11);
        a = _mm_xor_si128(_mm_xor_si128(lo, hi), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 bits to 64, then to 32 with a Barrett reduction. */
    __m128i t = _mm_clmulepi64_si128(a, k3k4, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    t = _mm_srli_si128(a, 4);
    a = _mm_clmulepi64_si128(_mm_and_si128(a, low32), k5, 0x00);
    a = _mm_xor_si128(a, t);
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}
#endif

PyObject *py_crc32(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32(data, value=0) takes 1 or 2 arguments");
        return NULL;
    }
    unsigned long value = 0;
    if (nargs == 2) {
        value = PyLong_AsUnsignedLongMask(args[1]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    uLong crc = (uLong)(value & 0xFFFFFFFFUL);
    if (data.len >= CRC_NOGIL) {
        Py_BEGIN_ALLOW_THREADS
        crc = fast_crc(crc, (const unsigned char *)data.buf, data.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = fast_crc(crc, (const unsigned char *)data.buf, data.len);
    }
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong((unsigned long)crc);
}
