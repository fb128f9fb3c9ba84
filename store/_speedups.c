/* The per-record loops of the file journal's scan, load replay and append, compiled (issue:
 * speed of the journal's hot paths). The pure-Python code in reader.py is the reference: the
 * scan applies exactly the same rules (store.file.format: "a record is valid if and only if
 * ...", "in sequence", "end of data", the two padding rules) and returns exactly the same
 * records, the replay the same rules as replay_file; the tests run both over the same files
 * and compare. Built by setup.py as an optional extension: without a compiler
 * the package falls back to the Python loop.
 *
 * scan(data, file_id, start, floor, pad_unit) -> (records, end, last_lsn, count)
 *   data      a bytes-like object (the whole file)
 *   records   list of (offset, length, type, user_type, compact_count, lsn, id, tx_id,
 *             tx_count, body) tuples, body a bytes object
 *
 * scan_replay(data, file_id, start, floor, pad_unit, entries, index, info_type, live,
 *             updated_only, file_key, add, update, other) -> (end, last_lsn, count, first_lsn,
 *             positives, live_bytes)
 *   the same loop, for a load: an ADD or UPDATE is replayed as it is read (the rules of
 *   store.file.reader.replay_file into the Replayer's entries list and id index and the
 *   LiveIndex's records dict and updated-only set), never becoming a raw record; any other
 *   record is handed as one to other(record), in file order. replay_adds(records, start, ...)
 *   applies the same rules to a run of raw records (the compactor and offline tools).
 *
 * append_record(buf, rtype, user_type, flags, file_id, lsn, durable_lsn, id, tx_id, tx_count,
 *               data) -> None
 *   appends one whole record (head, body, tail) to the bytearray buf, as the Python append path
 *   does with its argument checks, zlib.crc32, RECORD_HEAD.pack, two concatenations and
 *   RECORD_TAIL.pack. An id or tx_id outside signed 64 bits, or a user_type outside 0..255, is
 *   the ValueError the Python path raises, with its message; buf is then left as it was.
 *
 * peek_message(data, addresses, header_type, version), replay_message_run(records, start,
 * end, ...), keep_run(messages, ...) and add_entries_run(entries, ...): the messaging load's
 * look at a message record without decoding it, its loop over the two records of every
 * message (store.messaging.recovery.replay_messages), its keeping of the loaded messages
 * (store.messaging.loader._messages) and its filling of each queue
 * (store.messaging.queues.MessageQueue.add_entries). The Python code of each is the
 * reference; tests/messaging/test_replay.py compares them.
 *
 * Record head (little-endian, 52 bytes): length u32, type u8, user_type u8, compact_count u8,
 * flags u8, file_id u64, lsn u64, durable_lsn u64, id i64, tx_id i64, tx_count u32; then the
 * body; then the tail: checksum u32 (CRC-32 of the body, continued over the head), length u32.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CLMUL_CODE 1
#include <immintrin.h>
#endif

#define HEAD 52
#define OVERHEAD 60

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p) {
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

/* ---- CRC-32 -------------------------------------------------------------------------------
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

static int have_clmul = 0;
static int have_vclmul = 0;

static uLong zlib_crc(uLong crc, const unsigned char *p, Py_ssize_t n) {
    while (n > 0) {
        uInt step = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, step);
        p += step;
        n -= step;
    }
    return crc;
}

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
__attribute__((target("pclmul,sse4.1"))) static uint32_t
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

/* zlib's crc32(crc, p, n), faster where the CPU allows. */
static uLong fast_crc(uLong crc, const unsigned char *p, Py_ssize_t n) {
#ifdef HAVE_CLMUL_CODE
    if (have_clmul && n >= 64) {
        Py_ssize_t bulk = n & ~(Py_ssize_t)15;
        crc = ~clmul_fold(p, bulk, ~(uint32_t)crc) & 0xFFFFFFFFUL;
        p += bulk;
        n -= bulk;
    }
#endif
    return zlib_crc(crc, p, n);
}

/* A body this large has its CRC-32 computed with the GIL released. */
#define CRC_NOGIL 65536

static PyObject *py_crc32(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

/* Where each record in sequence goes: into a list of raw record tuples (scan), or replayed
   (scan_replay: adds and updates into a Replayer and a LiveIndex, any other record as a raw
   tuple handed to a Python callable). */
typedef struct {
    PyObject *out;                      /* scan: the list of raw records */
    PyObject *entries, *index;          /* scan_replay: the Replayer's containers */
    PyTypeObject *info_type;            /* RecordInfo */
    PyObject *live, *updated_only;      /* the LiveIndex's, live None: no index */
    PyObject *other;                    /* callable(raw record) for every other record */
    unsigned long long file_key;
    long add, update;
    long long positives;                /* adds and updates replayed */
    unsigned long long live_bytes;      /* their lengths, summed */
} Sink;

static PyObject *raw_record(const unsigned char *h, Py_ssize_t pos, uint32_t length,
                            unsigned int rtype, unsigned int urt, unsigned int cc, uint64_t lsn,
                            int64_t rid, int64_t tx_id, uint32_t tx_count) {
    PyObject *rec = PyTuple_New(10);
    if (rec == NULL)
        return NULL;
    PyObject *items[10] = {
        PyLong_FromSsize_t(pos),
        PyLong_FromUnsignedLong(length),
        PyLong_FromLong((long)rtype),
        PyLong_FromLong((long)urt),
        PyLong_FromLong((long)cc),
        PyLong_FromUnsignedLongLong((unsigned long long)lsn),
        PyLong_FromLongLong((long long)rid),
        PyLong_FromLongLong((long long)tx_id),
        PyLong_FromUnsignedLong(tx_count),
        PyBytes_FromStringAndSize((const char *)(h + HEAD), (Py_ssize_t)(length - OVERHEAD)),
    };
    int failed = 0;
    for (int i = 0; i < 10; i++) {
        if (items[i] == NULL)
            failed = 1;
        PyTuple_SET_ITEM(rec, i, items[i]); /* steals; a NULL slot is freed safely */
    }
    if (failed) {
        Py_DECREF(rec);
        return NULL;
    }
    return rec;
}

static int replay_positive(Sink *s, PyObject *rid, PyObject *urt, PyObject *body, int is_update,
                           unsigned long long length);

static int sink_record(Sink *s, const unsigned char *h, Py_ssize_t pos, uint32_t length,
                       unsigned int rtype, unsigned int urt, unsigned int cc, uint64_t lsn,
                       int64_t rid, int64_t tx_id, uint32_t tx_count) {
    if (s->out == NULL && ((long)rtype == s->add || (long)rtype == s->update)) {
        PyObject *id = PyLong_FromLongLong((long long)rid), *ut = PyLong_FromLong((long)urt);
        PyObject *body = PyBytes_FromStringAndSize((const char *)(h + HEAD),
                                                   (Py_ssize_t)(length - OVERHEAD));
        int rc = -1;
        if (id != NULL && ut != NULL && body != NULL)
            rc = replay_positive(s, id, ut, body, (long)rtype == s->update, length);
        Py_XDECREF(id);
        Py_XDECREF(ut);
        Py_XDECREF(body);
        return rc;
    }
    PyObject *rec = raw_record(h, pos, length, rtype, urt, cc, lsn, rid, tx_id, tx_count);
    if (rec == NULL)
        return -1;
    int rc;
    if (s->out != NULL) {
        rc = PyList_Append(s->out, rec);
    } else {
        PyObject *r = PyObject_CallOneArg(s->other, rec);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    Py_DECREF(rec);
    return rc;
}

/* The records in sequence of data[start:], each given to the sink; the rules of
   store.file.reader.python_scan. Sets *end (where the data ends), *last_lsn, *count and
   *first_lsn (of the first record; 0 if none). Returns -1 with an exception set. */
static int scan_loop(const unsigned char *data, Py_ssize_t size, unsigned long long file_id,
                     Py_ssize_t start, int floor, Py_ssize_t pad_unit, Sink *sink,
                     Py_ssize_t *end, uint64_t *last_lsn_out, long long *count_out,
                     uint64_t *first_lsn) {
    Py_ssize_t pos = start, padded_from = -1, data_end = size;
    uint64_t last_lsn = 0;
    long long count = 0;
    *first_lsn = 0;
    /* Everything from data_end on is zeros: lets the padding rule stop without a search. */
    while (data_end > 0 && data[data_end - 1] == 0)
        data_end--;
    while (pad_unit > 0 && pos >= 0 && pos + OVERHEAD <= size) {
        const unsigned char *h = data + pos;
        uint32_t length = rd32(h);
        if (length == 0) {
            /* Zero padding: the next record starts at a pad_unit boundary. */
            if (pos >= data_end)
                break;
            Py_ssize_t m = pos;
            while (m < size && data[m] == 0)
                m++;
            if (m >= size)
                break;
            Py_ssize_t boundary = m - m % pad_unit;
            if (boundary <= pos || padded_from >= 0)
                break;
            padded_from = pos;
            pos = boundary;
            continue;
        }
        unsigned int rtype = h[4], urt = h[5], cc = h[6], fl = h[7];
        uint64_t fid = rd64(h + 8), lsn = rd64(h + 16), dlsn = rd64(h + 24);
        int64_t rid = (int64_t)rd64(h + 32), tx_id = (int64_t)rd64(h + 40);
        uint32_t tx_count = rd32(h + 48);
        int in_sequence;
        if (count)
            in_sequence = last_lsn != UINT64_MAX && lsn == last_lsn + 1;
        else
            in_sequence = !((fl & (unsigned int)floor) && lsn >= 1 && dlsn < lsn - 1);
        int valid = 0;
        if (length >= OVERHEAD && (Py_ssize_t)length <= size - pos && fid == file_id &&
            rtype >= 10 && rtype <= 19 && in_sequence) {
            const unsigned char *rec_end = h + length;
            uint32_t crc = rd32(rec_end - 8), length_copy = rd32(rec_end - 4);
            if (length_copy == length) {
                uLong c = fast_crc(0L, h + HEAD, (Py_ssize_t)(length - OVERHEAD));
                c = zlib_crc(c, h, HEAD);
                valid = (uint32_t)c == crc;
            }
        }
        if (!valid) {
            /* Padding shorter than the length field: only zeros up to the boundary. */
            Py_ssize_t gap = (pad_unit - pos % pad_unit) % pad_unit;
            if (gap > 0 && gap < 4 && padded_from < 0) {
                int zeros = 1;
                for (Py_ssize_t i = 0; i < gap; i++)
                    if (data[pos + i] != 0)
                        zeros = 0;
                if (zeros) {
                    padded_from = pos;
                    pos += gap;
                    continue;
                }
            }
            break;
        }
        if (sink_record(sink, h, pos, length, rtype, urt, cc, lsn, rid, tx_id, tx_count) < 0)
            return -1;
        if (!count)
            *first_lsn = lsn;
        last_lsn = lsn;
        count++;
        pos += length;
        padded_from = -1;
    }
    if (padded_from >= 0)
        pos = padded_from;
    *end = pos;
    *last_lsn_out = last_lsn;
    *count_out = count;
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long file_id;
    Py_ssize_t start, pad_unit;
    int floor;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Knin", &view, &file_id, &start, &floor, &pad_unit))
        return NULL;
    Sink sink;
    memset(&sink, 0, sizeof(sink));
    sink.out = PyList_New(0);
    if (sink.out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t end;
    uint64_t last_lsn, first_lsn;
    long long count;
    int rc = scan_loop((const unsigned char *)view.buf, view.len, file_id, start, floor, pad_unit,
                       &sink, &end, &last_lsn, &count, &first_lsn);
    PyBuffer_Release(&view);
    if (rc < 0) {
        Py_DECREF(sink.out);
        return NULL;
    }
    return Py_BuildValue("(NnKL)", sink.out, end, (unsigned long long)last_lsn, count);
}

static void wr32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* A journal record's head (HEAD bytes) at h: size, record type, user record type, a zero
   byte, flags, file id, lsn, durable lsn, id, transaction id, transaction count. */
static void put_head(unsigned char *h, uint32_t n, unsigned long rtype, unsigned urt,
                     unsigned long flags, unsigned long long file_id, unsigned long long lsn,
                     unsigned long long dlsn, long long rid, long long tx_id, uint32_t tx_count) {
    wr32(h, n);
    h[4] = (unsigned char)rtype;
    h[5] = (unsigned char)urt;
    h[6] = 0;
    h[7] = (unsigned char)flags;
    wr64(h + 8, file_id);
    wr64(h + 16, lsn);
    wr64(h + 24, dlsn);
    wr64(h + 32, (uint64_t)rid);
    wr64(h + 40, (uint64_t)tx_id);
    wr32(h + 48, tx_count);
}

static PyObject *append_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "append_record takes 11 arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "append_record: buf must be a bytearray");
        return NULL;
    }
    /* The journal's own argument checks first, with its messages: nothing is changed when
     * one fails. */
    int overflow_id = 0, overflow_tx = 0;
    long long rid = PyLong_AsLongLongAndOverflow(args[7], &overflow_id);
    if (rid == -1 && PyErr_Occurred())
        return NULL;
    long long tx_id = PyLong_AsLongLongAndOverflow(args[8], &overflow_tx);
    if (tx_id == -1 && PyErr_Occurred())
        return NULL;
    if (overflow_id || overflow_tx) {
        PyErr_Format(PyExc_ValueError,
                     "record and transaction ids must be signed 64-bit integers: %R, %R",
                     args[7], args[8]);
        return NULL;
    }
    int overflow_urt = 0;
    long urt = PyLong_AsLongAndOverflow(args[2], &overflow_urt);
    if (urt == -1 && PyErr_Occurred())
        return NULL;
    if (overflow_urt || urt < 0 || urt > 255) {
        PyErr_Format(PyExc_ValueError, "user_record_type must be 0..255, not %R", args[2]);
        return NULL;
    }
    unsigned long rtype = PyLong_AsUnsignedLong(args[1]);
    unsigned long flags = PyLong_AsUnsignedLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (rtype > 255 || flags > 255) {
        PyErr_SetString(PyExc_OverflowError, "append_record: a byte field is over 255");
        return NULL;
    }
    unsigned long long file_id = PyLong_AsUnsignedLongLong(args[4]);
    unsigned long long lsn = PyLong_AsUnsignedLongLong(args[5]);
    unsigned long long dlsn = PyLong_AsUnsignedLongLong(args[6]);
    unsigned long tx_count = PyLong_AsUnsignedLong(args[9]);
    if (PyErr_Occurred())
        return NULL;
    if (tx_count > 0xFFFFFFFFUL) {
        PyErr_SetString(PyExc_OverflowError, "append_record: a 32-bit field is too large");
        return NULL;
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[10], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = OVERHEAD + data.len;
    if (n > 0xFFFFFFFFLL) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_OverflowError, "append_record: record too large");
        return NULL;
    }
    uLong crc;
    if (data.len >= CRC_NOGIL) {
        Py_BEGIN_ALLOW_THREADS
        crc = fast_crc(0L, (const unsigned char *)data.buf, data.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = fast_crc(0L, (const unsigned char *)data.buf, data.len);
    }
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, at + n) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *h = (unsigned char *)PyByteArray_AS_STRING(buf) + at;
    put_head(h, (uint32_t)n, rtype, (unsigned)urt, flags, file_id, lsn, dlsn, rid, tx_id,
             (uint32_t)tx_count);
    if (data.len)
        memcpy(h + HEAD, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    crc = zlib_crc(crc, h, HEAD);
    wr32(h + n - 8, (uint32_t)crc);
    wr32(h + n - 4, (uint32_t)n);
    Py_RETURN_NONE;
}

/* append_records_run(buf, rtype, flags, file_id, first_lsn, durable_lsn, ids, start, stop,
   tx_id) -> None: append_record(buf, rtype, 0, flags, file_id, first_lsn + k, durable_lsn,
   ids[start + k], tx_id, 0, b"") for each k of 0 .. stop - start - 1 (records without a
   body: a transaction's deletes, FileJournal.append_deletes_tx), in one call. Every id is
   checked before anything is appended (nothing is when one is refused). */
static PyObject *append_records_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "append_records_run takes 10 arguments");
        return NULL;
    }
    PyObject *buf = args[0], *ids = args[6];
    if (!PyByteArray_Check(buf) || !PyList_CheckExact(ids)) {
        PyErr_SetString(PyExc_TypeError, "append_records_run: buf must be a bytearray, ids a list");
        return NULL;
    }
    unsigned long rtype = PyLong_AsUnsignedLong(args[1]);
    unsigned long flags = PyLong_AsUnsignedLong(args[2]);
    unsigned long long file_id = PyLong_AsUnsignedLongLong(args[3]);
    unsigned long long lsn = PyLong_AsUnsignedLongLong(args[4]);
    unsigned long long dlsn = PyLong_AsUnsignedLongLong(args[5]);
    Py_ssize_t start = PyLong_AsSsize_t(args[7]), stop = PyLong_AsSsize_t(args[8]);
    int overflow = 0;
    long long tx_id = PyLong_AsLongLongAndOverflow(args[9], &overflow);
    if (PyErr_Occurred())
        return NULL;
    if (rtype > 255 || flags > 255) {
        PyErr_SetString(PyExc_OverflowError, "append_records_run: a byte field is over 255");
        return NULL;
    }
    if (start < 0 || start > stop || stop > PyList_GET_SIZE(ids)) {
        PyErr_SetString(PyExc_IndexError, "append_records_run: start and stop out of range");
        return NULL;
    }
    for (Py_ssize_t i = start; i < stop && !overflow; i++) {
        PyObject *id = PyList_GET_ITEM(ids, i);
        long long rid = PyLong_AsLongLongAndOverflow(id, &overflow);
        if (rid == -1 && PyErr_Occurred())
            return NULL;
        if (overflow) {
            PyErr_Format(PyExc_ValueError,
                         "record and transaction ids must be signed 64-bit integers: %R, %R",
                         id, args[9]);
            return NULL;
        }
    }
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "record and transaction ids must be signed 64-bit "
                     "integers: the transaction's is %R", args[9]);
        return NULL;
    }
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, at + (stop - start) * OVERHEAD) < 0)
        return NULL;
    unsigned char *h = (unsigned char *)PyByteArray_AS_STRING(buf) + at;
    for (Py_ssize_t i = start; i < stop; i++, h += OVERHEAD, lsn++) {
        long long rid = PyLong_AsLongLong(PyList_GET_ITEM(ids, i)); /* checked above */
        put_head(h, OVERHEAD, rtype, 0, flags, file_id, lsn, dlsn, rid, tx_id, 0);
        wr32(h + HEAD, (uint32_t)zlib_crc(0L, h, HEAD));
        wr32(h + HEAD + 4, (uint32_t)OVERHEAD);
    }
    Py_RETURN_NONE;
}

/* One id's entries in a dict: value alone (an int) or, from the second on, a list of them.
   Steals nothing; returns -1 with an exception set. */
static int add_entry(PyObject *dict, PyObject *key, PyObject *value) {
    PyObject *where = PyDict_GetItemWithError(dict, key);
    if (where == NULL) {
        if (PyErr_Occurred())
            return -1;
        return PyDict_SetItem(dict, key, value);
    }
    if (PyList_CheckExact(where))
        return PyList_Append(where, value);
    PyObject *pair = PyList_New(2);
    if (pair == NULL)
        return -1;
    Py_INCREF(where);
    Py_INCREF(value);
    PyList_SET_ITEM(pair, 0, where);
    PyList_SET_ITEM(pair, 1, value);
    int rc = PyDict_SetItem(dict, key, pair);
    Py_DECREF(pair);
    return rc;
}

/* Replayer.add or Replayer.update (store.journal.replay) of one positive record, and, when the
   sink has a live index, LiveIndex's rules for it (the per-file count and live bytes summed in
   the sink). Returns -1 with an exception set. */
static int replay_positive(Sink *s, PyObject *rid, PyObject *urt, PyObject *body, int is_update,
                           unsigned long long length) {
    PyObject *info = s->info_type->tp_alloc(s->info_type, 4);
    if (info == NULL)
        return -1;
    PyObject *flag = is_update ? Py_True : Py_False;
    Py_INCREF(rid);
    Py_INCREF(urt);
    Py_INCREF(body);
    Py_INCREF(flag);
    PyTuple_SET_ITEM(info, 0, rid);
    PyTuple_SET_ITEM(info, 1, urt);
    PyTuple_SET_ITEM(info, 2, body);
    PyTuple_SET_ITEM(info, 3, flag);
    /* Two ints, bytes and a bool cannot be part of a cycle: out of the collector's sight from
       the start (as CPython's own collector untracks such tuples when it first meets them).
       A load makes millions of these with the collector paused; left tracked, the first
       collection after the load walked every one of them. */
    if (PyBytes_CheckExact(body))
        PyObject_GC_UnTrack(info);
    PyObject *pos = PyLong_FromSsize_t(PyList_GET_SIZE(s->entries));
    if (pos == NULL || PyList_Append(s->entries, info) < 0) {
        Py_XDECREF(pos);
        Py_DECREF(info);
        return -1;
    }
    Py_DECREF(info);
    int rc = add_entry(s->index, rid, pos);
    Py_DECREF(pos);
    if (rc < 0 || s->live == Py_None)
        return rc;
    s->positives++;
    s->live_bytes += length;
    if (!is_update) {
        if (PySet_GET_SIZE(s->updated_only) > 0 && PySet_Discard(s->updated_only, rid) < 0)
            return -1;
    } else {
        int known = PyDict_Contains(s->live, rid);
        if (known < 0 || (!known && PySet_Add(s->updated_only, rid) < 0))
            return -1;
    }
    PyObject *entry = PyLong_FromUnsignedLongLong(s->file_key | length);
    if (entry == NULL)
        return -1;
    rc = add_entry(s->live, rid, entry);
    Py_DECREF(entry);
    return rc;
}

/* The replay arguments shared by replay_adds, replay_rows and scan_replay: entries, index,
   info_type, live, updated_only, file_key, add, update. Returns -1 with an exception set. */
static int replay_sink(Sink *s, PyObject *const *args) {
    memset(s, 0, sizeof(*s));
    s->entries = args[0];
    s->index = args[1];
    s->info_type = (PyTypeObject *)args[2];
    s->live = args[3];
    s->updated_only = args[4];
    if (!PyList_CheckExact(s->entries) || !PyDict_CheckExact(s->index) || !PyType_Check(args[2]) ||
        !PyType_IsSubtype(s->info_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "entries must be a list, index a dict, info_type a tuple type");
        return -1;
    }
    if (s->live != Py_None && (!PyDict_CheckExact(s->live) || !PySet_Check(s->updated_only))) {
        PyErr_SetString(PyExc_TypeError, "live must be a dict or None, updated_only a set");
        return -1;
    }
    s->file_key = PyLong_AsUnsignedLongLong(args[5]);
    s->add = PyLong_AsLong(args[6]);
    s->update = PyLong_AsLong(args[7]);
    return PyErr_Occurred() ? -1 : 0;
}

/* replay_adds(records, start, entries, index, info_type, live, updated_only, file_key, add,
   update) -> (stop, count, live_bytes): the run of ADD and UPDATE records from records[start]
   replayed as store.file.reader.replay_file does with a store.journal.replay.Replayer (its
   entries list and index dict) and, unless live is None, a LiveIndex (its records dict and
   updated_only set); stops at the first record of another type (stop: its position). */
static PyObject *replay_adds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "replay_adds takes 10 arguments");
        return NULL;
    }
    Sink s;
    if (replay_sink(&s, args + 2) < 0)
        return NULL;
    PyObject *records = args[0];
    if (!PyList_CheckExact(records)) {
        PyErr_SetString(PyExc_TypeError, "replay_adds: records must be a list");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records), i = start < 0 ? 0 : start;
    for (; i < n; i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) != 10) {
            PyErr_SetString(PyExc_TypeError, "replay_adds: a record is not a 10-tuple");
            return NULL;
        }
        long rtype = PyLong_AsLong(PyTuple_GET_ITEM(rec, 2));
        if (rtype == -1 && PyErr_Occurred())
            return NULL;
        if (rtype != s.add && rtype != s.update)
            break;
        unsigned long long length = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(rec, 1));
        if (PyErr_Occurred() ||
            replay_positive(&s, PyTuple_GET_ITEM(rec, 6), PyTuple_GET_ITEM(rec, 3),
                            PyTuple_GET_ITEM(rec, 9), rtype == s.update, length) < 0)
            return NULL;
    }
    return Py_BuildValue("(nLK)", i, s.positives, s.live_bytes);
}

/* replay_rows(rows, start, entries, index, info_type, live, updated_only, file_key, add, update,
   empty, plain) -> stop (live None: a database journal has no per-file index): the
   run of ADD and UPDATE rows of a database journal's load from rows[start] (each a tuple
   (id, record_type, tx_id, user_record_type, record, ...), as store.db.journal reads them)
   replayed as Replayer.add / Replayer.update do (a NULL or empty record is empty), each id
   appended to the list plain (the rows the caller counts into its index in bulk); stops at
   the first row of another type, or not a tuple of an int record type, and returns its
   position (len(rows) when none). */
static PyObject *replay_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "replay_rows takes 12 arguments");
        return NULL;
    }
    PyObject *rows = args[0], *empty = args[10], *plain = args[11];
    Sink s;
    if (replay_sink(&s, args + 2) < 0)
        return NULL;
    if (!PyList_CheckExact(rows) || !PyList_CheckExact(plain)) {
        PyErr_SetString(PyExc_TypeError, "replay_rows: rows and plain must be lists");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows), i = start < 0 ? 0 : start;
    for (; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 5)
            break; /* not a row this loop knows: the caller's rules say what it is */
        PyObject *rt = PyTuple_GET_ITEM(row, 1);
        if (!PyLong_CheckExact(rt))
            break; /* not an int: the caller's rules say what it is */
        long rtype = PyLong_AsLong(rt);
        if (rtype == -1 && PyErr_Occurred())
            return NULL;
        if (rtype != s.add && rtype != s.update)
            break;
        PyObject *rid = PyTuple_GET_ITEM(row, 0), *body = PyTuple_GET_ITEM(row, 4);
        int truth = PyObject_IsTrue(body); /* "record or b''", as the caller's loop */
        if (truth < 0)
            return NULL;
        if (!truth)
            body = empty;
        if (replay_positive(&s, rid, PyTuple_GET_ITEM(row, 3), body, rtype == s.update, 0) < 0 ||
            PyList_Append(plain, rid) < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* scan_replay(data, file_id, start, floor, pad_unit, entries, index, info_type, live,
   updated_only, file_key, add, update, other) -> (end, last_lsn, count, first_lsn, positives,
   live_bytes): scan and replay_adds in one pass, for a load: the records in sequence of data
   (the rules of scan), each ADD or UPDATE replayed as replay_adds does without ever being a
   raw record tuple, and every other record handed as one to other(record), in file order. */
static PyObject *scan_replay(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "scan_replay takes 14 arguments");
        return NULL;
    }
    Sink s;
    if (replay_sink(&s, args + 5) < 0)
        return NULL;
    s.other = args[13];
    if (!PyCallable_Check(s.other)) {
        PyErr_SetString(PyExc_TypeError, "scan_replay: other must be callable");
        return NULL;
    }
    unsigned long long file_id = PyLong_AsUnsignedLongLong(args[1]);
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    int floor = (int)PyLong_AsLong(args[3]);
    Py_ssize_t pad_unit = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t end;
    uint64_t last_lsn, first_lsn;
    long long count;
    int rc = scan_loop((const unsigned char *)view.buf, view.len, file_id, start, floor, pad_unit,
                       &s, &end, &last_lsn, &count, &first_lsn);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    return Py_BuildValue("(nKLKLK)", end, (unsigned long long)last_lsn, count,
                         (unsigned long long)first_lsn, s.positives, s.live_bytes);
}

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)be32(p) << 32) | (uint64_t)be32(p + 4));
}

/* The header of an ADD_MESSAGE_PROTOCOL body (bytes) that peek_message accepts, or None (both
   new references); NULL with an exception set. */
static PyObject *peek_header(PyObject *data, PyObject *addresses, PyTypeObject *header_type,
                             long version) {
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (n < 5 || d[0] != version)
        Py_RETURN_NONE;
    Py_ssize_t end = 5 + (Py_ssize_t)be32(d + 1);
    if (end + 30 + 4 > n)
        Py_RETURN_NONE;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)d + 5, end - 5);
    if (raw == NULL)
        return NULL;
    PyObject *address = PyDict_GetItemWithError(addresses, raw); /* borrowed */
    if (address == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(raw);
            return NULL;
        }
        address = PyUnicode_DecodeUTF8((const char *)d + 5, end - 5, NULL);
        if (address == NULL) {
            Py_DECREF(raw);
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return NULL;
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (PyUnicode_GET_LENGTH(address) == 0) {
            Py_DECREF(address);
            Py_DECREF(raw);
            Py_RETURN_NONE;
        }
        int rc = PyDict_SetItem(addresses, raw, address);
        Py_DECREF(address); /* the dict holds it now */
        if (rc < 0) {
            Py_DECREF(raw);
            return NULL;
        }
    }
    Py_DECREF(raw);
    const unsigned char *f = d + end;
    unsigned int priority = f[0], durable = f[1];
    int64_t timestamp = be64(f + 2), expiration = be64(f + 10), scheduled = be64(f + 18);
    int32_t count = (int32_t)be32(f + 26);
    Py_ssize_t body_at = end + 30;
    if (priority > 9 || durable > 1 || count != 0 || timestamp < 0 || expiration < 0 ||
        scheduled < 0 || body_at + 4 + (Py_ssize_t)be32(d + body_at) != n)
        Py_RETURN_NONE;
    PyObject *header = header_type->tp_alloc(header_type, 4);
    if (header == NULL)
        return NULL;
    PyObject *p = PyLong_FromLong((long)priority), *sd = PyLong_FromLongLong((long long)scheduled);
    if (p == NULL || sd == NULL) {
        Py_XDECREF(p);
        Py_XDECREF(sd);
        Py_DECREF(header);
        return NULL;
    }
    PyObject *flag = durable ? Py_True : Py_False;
    Py_INCREF(address);
    Py_INCREF(flag);
    PyTuple_SET_ITEM(header, 0, address);
    PyTuple_SET_ITEM(header, 1, p);
    PyTuple_SET_ITEM(header, 2, flag);
    PyTuple_SET_ITEM(header, 3, sd);
    return header;
}


/* peek_message(data, addresses, header_type, version) -> header_type(address, priority,
   durable, scheduled_delivery) or None: store.messaging.message_records.peek_message, the
   reference, with the same checks in the same order (an ADD_MESSAGE_PROTOCOL body without
   properties that decode_message decodes whole into a valid Message); addresses caches the
   decoded address of each raw address. */
static PyObject *peek_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "peek_message takes 4 arguments");
        return NULL;
    }
    PyObject *addresses = args[1];
    PyTypeObject *header_type = (PyTypeObject *)args[2];
    if (!PyBytes_CheckExact(args[0]) || !PyDict_CheckExact(addresses) || !PyType_Check(args[2]) ||
        !PyType_IsSubtype(header_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "peek_message: data must be bytes, addresses a dict, header_type a tuple type");
        return NULL;
    }
    long version = PyLong_AsLong(args[3]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    return peek_header(args[0], addresses, header_type, version);
}

/* A slot of an object of a class with __slots__, by its member offset: borrowed, NULL if unset. */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* A new instance of a class with __slots__ (no __init__ run), each slot in offsets given the
   matching value (new references taken); NULL with an exception set. */
static PyObject *new_slotted(PyTypeObject *type, const Py_ssize_t *offsets, PyObject **values,
                             int n) {
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        Py_INCREF(values[i]);
        SLOT(obj, offsets[i]) = values[i];
    }
    return obj;
}

/* The member offsets of names (a tuple of str) in type, into out (n of them); -1 with an
   exception set unless each is a __slots__ member of type. */
static int slot_offsets(PyTypeObject *type, PyObject *names, Py_ssize_t *out, int n) {
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) != n) {
        PyErr_Format(PyExc_TypeError, "expected a tuple of %d slot names", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = PyDict_GetItemWithError(type->tp_dict, PyTuple_GET_ITEM(names, i));
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%R is not a slot of %s",
                             PyTuple_GET_ITEM(names, i), type->tp_name);
            return -1;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "%R is not a writable object slot",
                         PyTuple_GET_ITEM(names, i));
            return -1;
        }
        out[i] = m->offset;
    }
    return 0;
}

/* replay_message_run(records, start, end, messages, queue_entries, orders, addresses,
   header_type, version, add_ref, add_message, loaded_type, entry_type, ready) ->
   (stop, highest): the two records of every message, as the inline loop of
   store.messaging.recovery.replay_messages replays them (the reference), from records[start]
   up to records[end]: an ADD_MESSAGE_PROTOCOL record that peek_message accepts, of an id not
   seen yet, becomes a LoadedMessage in messages; a 9-byte ADD_REF of a message known, with a
   header and no ref to that queue yet, becomes its QueueEntry (numbered by orders, READY) in
   the message's refs and at the end of the queue's list in queue_entries. Stops at the first
   record it does not replay so (stop: its position; end when none) for the caller to replay;
   highest is the largest id among the records it replayed (0 if none). loaded_type and
   entry_type are classes with __slots__ whose fields are written directly, in the order of
   LOADED_SLOTS and ENTRY_SLOTS below. */
static const char *LOADED_SLOTS[] = {"message", "large_size", "size", "refs",
                                     "message_id", "header", "encoded"};
static const char *ENTRY_SLOTS[] = {"message_id", "priority", "order", "delivery_count",
                                    "scheduled", "state"};

/* The slot offsets of the last type asked for with one list of names: the loops are called
   once per run of records, which can be one record long. Holds a reference to the type. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t at[12];
} SlotCache;

static int offsets_uncached(PyTypeObject *type, const char **names, Py_ssize_t *out, int n);

static int offsets_of_cached(SlotCache *cache, PyTypeObject *type, const char **names,
                             Py_ssize_t *out, int n) {
    if (cache->type != type) {
        if (offsets_uncached(type, names, cache->at, n) < 0)
            return -1;
        Py_INCREF(type);
        Py_XSETREF(cache->type, type);
    }
    memcpy(out, cache->at, (size_t)n * sizeof(Py_ssize_t));
    return 0;
}

static int offsets_uncached(PyTypeObject *type, const char **names, Py_ssize_t *out, int n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        PyObject *name = PyUnicode_InternFromString(names[i]);
        if (name == NULL) {
            Py_DECREF(t);
            return -1;
        }
        PyTuple_SET_ITEM(t, i, name);
    }
    int rc = slot_offsets(type, t, out, n);
    Py_DECREF(t);
    return rc;
}

static SlotCache loaded_cache, entry_cache, stored_cache;

static PyObject *replay_message_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "replay_message_run takes 14 arguments");
        return NULL;
    }
    PyObject *records = args[0], *messages = args[3], *queue_entries = args[4];
    PyObject *orders = args[5], *addresses = args[6], *ready = args[13];
    PyTypeObject *header_type = (PyTypeObject *)args[7];
    PyTypeObject *loaded_type = (PyTypeObject *)args[11], *entry_type = (PyTypeObject *)args[12];
    if (!PyList_CheckExact(records) || !PyDict_CheckExact(messages) ||
        !PyDict_Check(queue_entries) || !PyIter_Check(orders) || !PyDict_CheckExact(addresses) ||
        !PyType_Check(args[7]) || !PyType_IsSubtype(header_type, &PyTuple_Type) ||
        !PyType_Check(args[11]) || !PyType_Check(args[12])) {
        PyErr_SetString(PyExc_TypeError, "replay_message_run: bad argument types");
        return NULL;
    }
    Py_ssize_t loaded_at[7], entry_at[6];
    if (offsets_of_cached(&loaded_cache, loaded_type, LOADED_SLOTS, loaded_at, 7) < 0 ||
        offsets_of_cached(&entry_cache, entry_type, ENTRY_SLOTS, entry_at, 6) < 0)
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    long version = PyLong_AsLong(args[8]), add_ref = PyLong_AsLong(args[9]);
    long add_message = PyLong_AsLong(args[10]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (end > n)
        end = n;
    PyObject *zero = PyLong_FromLong(0); /* cached small int: never fails */
    long long highest = 0;
    Py_ssize_t i = start < 0 ? 0 : start;
    for (; i < end; i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 3)
            break;
        PyObject *mid = PyTuple_GET_ITEM(rec, 0), *data = PyTuple_GET_ITEM(rec, 2);
        if (!PyLong_CheckExact(mid) || !PyLong_CheckExact(PyTuple_GET_ITEM(rec, 1)) ||
            !PyBytes_CheckExact(data))
            break;
        int overflow;
        long long id = PyLong_AsLongLongAndOverflow(mid, &overflow);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(rec, 1));
        if (overflow || (id == -1 && PyErr_Occurred()) || (kind == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            break; /* the reference decides */
        }
        const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
        Py_ssize_t len = PyBytes_GET_SIZE(data);
        if (kind == add_ref && len == 9 && d[0] == version) {
            PyObject *target = PyDict_GetItemWithError(messages, mid); /* borrowed */
            if (target == NULL) {
                if (PyErr_Occurred())
                    goto error;
            } else {
                if (Py_TYPE(target) != loaded_type)
                    break;
                PyObject *header = SLOT(target, loaded_at[5]), *refs = SLOT(target, loaded_at[3]);
                if (header == NULL || header == Py_None || refs == NULL ||
                    !PyDict_CheckExact(refs) || !PyTuple_Check(header) ||
                    PyTuple_GET_SIZE(header) < 4)
                    break;
                PyObject *qid = PyLong_FromLongLong(be64(d + 1));
                if (qid == NULL)
                    goto error;
                int has = PyDict_Contains(refs, qid);
                if (has != 0) {
                    Py_DECREF(qid);
                    if (has < 0)
                        goto error;
                    break; /* routed again: the reference's _route */
                }
                PyObject *order = PyIter_Next(orders);
                if (order == NULL) {
                    Py_DECREF(qid);
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_RuntimeError, "replay_message_run: orders ended");
                    goto error;
                }
                PyObject *values[6] = {mid, PyTuple_GET_ITEM(header, 1), order, zero,
                                       PyTuple_GET_ITEM(header, 3), ready};
                PyObject *entry = new_slotted(entry_type, entry_at, values, 6);
                Py_DECREF(order);
                if (entry == NULL) {
                    Py_DECREF(qid);
                    goto error;
                }
                int rc = PyDict_SetItem(refs, qid, entry);
                PyObject *list = rc < 0 ? NULL : PyDict_GetItemWithError(queue_entries, qid);
                if (rc == 0 && list == NULL && !PyErr_Occurred()) {
                    list = PyList_New(0);
                    rc = list == NULL ? -1 : PyDict_SetItem(queue_entries, qid, list);
                    Py_XDECREF(list); /* the dict holds it */
                }
                if (rc == 0 && (list == NULL || !PyList_CheckExact(list) ||
                                PyList_Append(list, entry) < 0)) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "queue_entries holds a non-list");
                    rc = -1;
                }
                Py_DECREF(entry);
                Py_DECREF(qid);
                if (rc < 0)
                    goto error;
            }
        } else if (kind == add_message) {
            int seen = PyDict_Contains(messages, mid);
            if (seen < 0)
                goto error;
            if (seen)
                break; /* written again: the reference's _add_message */
            PyObject *header = peek_header(data, addresses, header_type, version);
            if (header == NULL)
                goto error;
            if (header == Py_None) {
                Py_DECREF(header);
                break; /* properties, or a body peek refuses: the reference decodes it */
            }
            PyObject *size = PyLong_FromSsize_t(len), *refs = PyDict_New();
            PyObject *loaded = NULL;
            if (size != NULL && refs != NULL) {
                PyObject *values[7] = {Py_None, Py_None, size, refs, mid, header, data};
                loaded = new_slotted(loaded_type, loaded_at, values, 7);
            }
            Py_XDECREF(size);
            Py_XDECREF(refs);
            Py_DECREF(header);
            if (loaded == NULL)
                goto error;
            int rc = PyDict_SetItem(messages, mid, loaded);
            Py_DECREF(loaded);
            if (rc < 0)
                goto error;
        } else {
            break;
        }
        if (id > highest)
            highest = id;
    }
    return Py_BuildValue("(nL)", i, highest);
error:
    return NULL;
}

/* keep_run(messages, queues, kept, memory, loaded_type, stored_type, other) -> None: the
   keeping of loaded messages, as store.messaging.loader._messages does it (its Python code the
   reference): each LoadedMessage of messages that is inline and undecoded (message and
   large_size None, a header) and whose refs all name a queue of queues (a dict) becomes a
   StoredMessage in kept, holding its encoded body and its refs (one ref as _ref_queue, an
   int shared by every message of that queue, and _refs its entry; more as _ref_queue None
   and _refs the dict, as StoredMessage.__init__ does), and counts its size in
   memory[address] ([size, count], made when missing); every other item goes to other(id,
   loaded), in the same order. stored_type's slots are written directly (STORED_SLOTS). */
static const char *STORED_SLOTS[] = {"_encoded",  "_message",   "_message_id",
                                     "_record",   "_ref_queue", "_refs",
                                     "large_size", "position",  "size"};

static int count_memory(PyObject *memory, PyObject *address, PyObject *size) {
    PyObject *held = PyDict_GetItemWithError(memory, address); /* borrowed */
    if (held == NULL) {
        if (PyErr_Occurred())
            return -1;
        held = Py_BuildValue("[ii]", 0, 0);
        if (held == NULL)
            return -1;
        int rc = PyDict_SetItem(memory, address, held);
        Py_DECREF(held); /* the dict holds it */
        if (rc < 0)
            return -1;
    }
    if (!PyList_CheckExact(held) || PyList_GET_SIZE(held) != 2) {
        PyErr_SetString(PyExc_TypeError, "keep_run: memory holds a non-[size, count]");
        return -1;
    }
    PyObject *one = PyLong_FromLong(1); /* cached small int */
    PyObject *total = PyNumber_Add(PyList_GET_ITEM(held, 0), size);
    PyObject *count = total == NULL ? NULL : PyNumber_Add(PyList_GET_ITEM(held, 1), one);
    Py_DECREF(one);
    if (count == NULL) {
        Py_XDECREF(total);
        return -1;
    }
    PyList_SetItem(held, 0, total); /* steal; cannot fail on an index in range */
    PyList_SetItem(held, 1, count);
    return 0;
}

static PyObject *keep_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "keep_run takes 7 arguments");
        return NULL;
    }
    PyObject *messages = args[0], *queues = args[1], *kept = args[2], *memory = args[3];
    PyObject *other = args[6];
    PyTypeObject *loaded_type = (PyTypeObject *)args[4], *stored_type = (PyTypeObject *)args[5];
    if (!PyDict_CheckExact(messages) || !PyDict_Check(queues) || !PyDict_Check(kept) ||
        !PyDict_Check(memory) || !PyType_Check(args[4]) || !PyType_Check(args[5]) ||
        !PyCallable_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "keep_run: bad argument types");
        return NULL;
    }
    Py_ssize_t loaded_at[7], stored_at[9];
    if (offsets_of_cached(&loaded_cache, loaded_type, LOADED_SLOTS, loaded_at, 7) < 0 ||
        offsets_of_cached(&stored_cache, stored_type, STORED_SLOTS, stored_at, 9) < 0)
        return NULL;
    PyObject *canon = PyDict_New(); /* queue id -> the first int object seen for it */
    if (canon == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *mid, *loaded;
    while (PyDict_Next(messages, &pos, &mid, &loaded)) {
        int mine = Py_TYPE(loaded) == loaded_type;
        PyObject *header = NULL, *refs = NULL, *size = NULL, *encoded = NULL;
        if (mine) {
            header = SLOT(loaded, loaded_at[5]);
            refs = SLOT(loaded, loaded_at[3]);
            size = SLOT(loaded, loaded_at[2]);
            encoded = SLOT(loaded, loaded_at[6]);
            mine = SLOT(loaded, loaded_at[0]) == Py_None && SLOT(loaded, loaded_at[1]) == Py_None &&
                   header != NULL && PyTuple_Check(header) && PyTuple_GET_SIZE(header) >= 1 &&
                   refs != NULL && PyDict_CheckExact(refs) && PyDict_GET_SIZE(refs) > 0 &&
                   size != NULL && encoded != NULL && encoded != Py_None;
        }
        if (mine) {
            Py_ssize_t at = 0;
            PyObject *qid, *entry;
            while (mine && PyDict_Next(refs, &at, &qid, &entry)) {
                int has = PyDict_Contains(queues, qid);
                if (has < 0)
                    goto error;
                mine = has;
            }
        }
        if (!mine) { /* the reference decides: partly gone, gone, decoded or large */
            PyObject *r = PyObject_CallFunctionObjArgs(other, mid, loaded, NULL);
            if (r == NULL)
                goto error;
            Py_DECREF(r);
            continue;
        }
        PyObject *ref_queue = Py_None, *held = refs;
        if (PyDict_GET_SIZE(refs) == 1) {
            Py_ssize_t at = 0;
            PyObject *qid, *entry;
            PyDict_Next(refs, &at, &qid, &entry);
            ref_queue = PyDict_SetDefault(canon, qid, qid); /* borrowed */
            if (ref_queue == NULL)
                goto error;
            held = entry;
        }
        PyObject *values[9] = {encoded, Py_None, mid,     Py_None, ref_queue,
                               held,    Py_None, Py_None, size};
        PyObject *stored = new_slotted(stored_type, stored_at, values, 9);
        if (stored == NULL)
            goto error;
        int rc = PyDict_SetItem(kept, mid, stored);
        Py_DECREF(stored);
        if (rc < 0 || count_memory(memory, PyTuple_GET_ITEM(header, 0), size) < 0)
            goto error;
    }
    Py_DECREF(canon);
    Py_RETURN_NONE;
error:
    Py_DECREF(canon);
    return NULL;
}

/* add_entries_run(entries, by_id, ready, scheduled, now, entry_type, ready_state,
   scheduled_state) -> None: store.messaging.queues.MessageQueue.add_entries's loop (its
   Python code the reference), before the heaps are made: each QueueEntry into by_id under its
   message id, then scheduled ((scheduled, order, id) onto scheduled) when its scheduled time
   is after now, else ready ((-priority, order, id) onto ready), its state set to match. */
static PyObject *add_entries_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "add_entries_run takes 8 arguments");
        return NULL;
    }
    PyObject *entries = args[0], *by_id = args[1], *ready = args[2], *scheduled = args[3];
    PyObject *now = args[4], *ready_state = args[6], *scheduled_state = args[7];
    PyTypeObject *entry_type = (PyTypeObject *)args[5];
    if (!PyList_CheckExact(entries) || !PyDict_Check(by_id) || !PyList_CheckExact(ready) ||
        !PyList_CheckExact(scheduled) || !PyType_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "add_entries_run: bad argument types");
        return NULL;
    }
    Py_ssize_t at[6];
    if (offsets_of_cached(&entry_cache, entry_type, ENTRY_SLOTS, at, 6) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (Py_TYPE(entry) != entry_type) {
            PyErr_SetString(PyExc_TypeError, "add_entries_run: an entry is not a QueueEntry");
            return NULL;
        }
        PyObject *mid = SLOT(entry, at[0]), *priority = SLOT(entry, at[1]);
        PyObject *order = SLOT(entry, at[2]), *when = SLOT(entry, at[4]);
        if (mid == NULL || priority == NULL || order == NULL || when == NULL) {
            PyErr_SetString(PyExc_AttributeError, "add_entries_run: an entry is not filled");
            return NULL;
        }
        if (PyDict_SetItem(by_id, mid, entry) < 0)
            return NULL;
        int later = PyObject_RichCompareBool(when, now, Py_GT);
        if (later < 0)
            return NULL;
        PyObject *item;
        if (later) {
            item = PyTuple_Pack(3, when, order, mid);
        } else {
            PyObject *neg = PyNumber_Negative(priority);
            item = neg == NULL ? NULL : PyTuple_Pack(3, neg, order, mid);
            Py_XDECREF(neg);
        }
        if (item == NULL)
            return NULL;
        int rc = PyList_Append(later ? scheduled : ready, item);
        Py_DECREF(item);
        if (rc < 0)
            return NULL;
        PyObject *state = later ? scheduled_state : ready_state;
        Py_INCREF(state);
        Py_XSETREF(SLOT(entry, at[5]), state);
    }
    Py_RETURN_NONE;
}

/* ---- Pages: what a messaging load reads of every page --------------------------------------
 *
 * scan_page(data) -> (records, offset): store.paging.format.scan_page's loop over the records
 * of a page's bytes (big-endian framing: 0x7B, length u32, CRC-32 of the length's 4 bytes and
 * the payload, payload, 0x7D), the payloads as bytes objects, up to the first record that is
 * not valid; offset is where that record starts (len(data) when every record is valid). The
 * Python code decides what an invalid record means (a torn tail or a CorruptionError).
 * scan_bounds(data) -> (bounds, offset) is the same loop for scan_records: each payload as a
 * pair of native int64 (offset, length) in the bytes object bounds, no bytes object each.
 *
 * paged_runs(records, version) -> (runs, large) or None: store.messaging.page_scan's
 * python_paged_runs for a list of PAGED_MESSAGE payloads all in the plain layout PagedMessage.
 * decode unpacks with two struct calls (version, message id i64, transaction id i64, record
 * type 30 or 45, record length u32, record, queue count i32 >= 0, queue ids i64, nothing
 * after): runs of consecutive records with the same transaction and queue ids, as
 * (start, count, tx_id, queue_ids) tuples, and the message ids of the type 30 records. None
 * when any record is not in that layout: the Python code then decodes the page and names
 * the fault. paged_runs_in(data, bounds, version) does the same for the records scan_bounds
 * located in a page's bytes (store.paging.format.PageRecords). */
/* Whether a valid page record starts at offset of d (n bytes): framing, length and CRC-32
   (store.paging.format); its payload length in *length when it is. */
static int page_record_valid(const unsigned char *d, Py_ssize_t n, Py_ssize_t offset,
                             uint32_t *length) {
    if (n - offset < 10 || d[offset] != 0x7B)
        return 0;
    *length = be32(d + offset + 1);
    if ((uint64_t)*length > (uint64_t)(n - offset - 10))
        return 0;
    const unsigned char *payload = d + offset + 9;
    uLong crc = fast_crc(fast_crc(0, d + offset + 1, 4), payload, (Py_ssize_t)*length);
    return (uint32_t)crc == be32(d + offset + 5) && payload[*length] == 0x7D;
}

static PyObject *scan_page(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "scan_page(data) takes 1 argument");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, offset = 0;
    PyObject *records = PyList_New(0);
    if (records == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    uint32_t length;
    while (offset < n && page_record_valid(d, n, offset, &length)) {
        const unsigned char *payload = d + offset + 9;
        PyObject *record = PyBytes_FromStringAndSize((const char *)payload, (Py_ssize_t)length);
        if (record == NULL || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            Py_DECREF(records);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(record);
        offset += 10 + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", records, offset);
}

/* The queue ids tuple of a record's ids section (count ids of 8 bytes at p). */
static PyObject *queue_ids(const unsigned char *p, int32_t count) {
    PyObject *ids = PyTuple_New(count);
    if (ids == NULL)
        return NULL;
    for (int32_t i = 0; i < count; i++) {
        PyObject *qid = PyLong_FromLongLong(be64(p + 8 * (Py_ssize_t)i));
        if (qid == NULL) {
            Py_DECREF(ids);
            return NULL;
        }
        PyTuple_SET_ITEM(ids, i, qid);
    }
    return ids;
}

/* Append the run (start, count, tx_id, ids) to runs; -1 with an exception set. */
static int close_run(PyObject *runs, Py_ssize_t start, Py_ssize_t count, int64_t tx_id,
                     const unsigned char *ids, int32_t id_count) {
    PyObject *qids = queue_ids(ids, id_count);
    if (qids == NULL)
        return -1;
    PyObject *run = Py_BuildValue("(nnLN)", start, count, (long long)tx_id, qids);
    if (run == NULL)
        return -1;
    int rc = PyList_Append(runs, run);
    Py_DECREF(run);
    return rc;
}

/* The runs being built by paged_runs / paged_runs_in. */
typedef struct {
    PyObject *runs, *large;
    long version;
    Py_ssize_t start;
    int64_t tx;
    const unsigned char *ids;
    int32_t count; /* -1: no run yet */
} Runs;

/* Account record i (d, n bytes) in r: 0, 1 when it is not in the plain layout, -1 with an
   exception set. */
static int runs_add(Runs *r, const unsigned char *d, Py_ssize_t n, Py_ssize_t i) {
    if (n < 22 || d[0] != r->version || (d[17] != 30 && d[17] != 45))
        return 1;
    uint64_t end = 22 + (uint64_t)be32(d + 18);
    if (end + 4 > (uint64_t)n)
        return 1;
    int32_t count = (int32_t)be32(d + end);
    if (count < 0 || (uint64_t)n != end + 4 + 8 * (uint64_t)count)
        return 1;
    int64_t tx_id = be64(d + 9);
    const unsigned char *ids = d + end + 4;
    if (d[17] == 30) {
        PyObject *mid = PyLong_FromLongLong(be64(d + 1));
        if (mid == NULL || PyList_Append(r->large, mid) < 0) {
            Py_XDECREF(mid);
            return -1;
        }
        Py_DECREF(mid);
    }
    if (r->count >= 0 && tx_id == r->tx && count == r->count &&
        memcmp(ids, r->ids, 8 * (size_t)count) == 0)
        return 0;
    if (r->count >= 0 && close_run(r->runs, r->start, i - r->start, r->tx, r->ids, r->count) < 0)
        return -1;
    r->start = i;
    r->tx = tx_id;
    r->ids = ids;
    r->count = count;
    return 0;
}

/* (runs, large) once every record was added (total of them); NULL with an exception set. */
static PyObject *runs_result(Runs *r, Py_ssize_t total) {
    if (r->count >= 0 && close_run(r->runs, r->start, total - r->start, r->tx, r->ids, r->count) < 0)
        return NULL;
    return Py_BuildValue("(OO)", r->runs, r->large);
}

static int runs_init(Runs *r, PyObject *version) {
    memset(r, 0, sizeof(*r));
    r->count = -1;
    r->version = PyLong_AsLong(version);
    if (r->version == -1 && PyErr_Occurred())
        return -1;
    r->runs = PyList_New(0);
    r->large = PyList_New(0);
    return r->runs == NULL || r->large == NULL ? -1 : 0;
}

static PyObject *paged_runs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "paged_runs(records: list, version) takes 2 arguments");
        return NULL;
    }
    Runs r;
    PyObject *result = NULL;
    if (runs_init(&r, args[1]) < 0)
        goto done;
    Py_ssize_t total = PyList_GET_SIZE(args[0]);
    for (Py_ssize_t i = 0; i < total; i++) {
        PyObject *item = PyList_GET_ITEM(args[0], i);
        int rc = PyBytes_Check(item)
                     ? runs_add(&r, (const unsigned char *)PyBytes_AS_STRING(item),
                                PyBytes_GET_SIZE(item), i)
                     : 1;
        if (rc < 0)
            goto done;
        if (rc > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    result = runs_result(&r, total);
done:
    Py_XDECREF(r.runs);
    Py_XDECREF(r.large);
    return result;
}

/* paged_runs_in(data, bounds, version): paged_runs over the records of a page's bytes whose
   payloads scan_bounds located (bounds: native int64 pairs of payload offset and length). */
static PyObject *paged_runs_in(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "paged_runs_in(data, bounds, version) takes 3 arguments");
        return NULL;
    }
    Py_buffer data, bounds;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &bounds, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    Runs r;
    PyObject *result = NULL;
    if (runs_init(&r, args[2]) < 0)
        goto done;
    Py_ssize_t total = bounds.len / 16;
    const int64_t *b = (const int64_t *)bounds.buf;
    for (Py_ssize_t i = 0; i < total; i++) {
        int64_t at = b[2 * i], n = b[2 * i + 1];
        if (at < 0 || n < 0 || at + n > data.len) {
            PyErr_SetString(PyExc_ValueError, "paged_runs_in: bounds outside the data");
            goto done;
        }
        int rc = runs_add(&r, (const unsigned char *)data.buf + at, (Py_ssize_t)n, i);
        if (rc < 0)
            goto done;
        if (rc > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    result = runs_result(&r, total);
done:
    Py_XDECREF(r.runs);
    Py_XDECREF(r.large);
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&data);
    return result;
}

/* scan_bounds(data) -> (bounds, offset): scan_page's loop, each valid record's payload as a
   pair of native int64 (offset, length) in the bytes object bounds instead of a bytes object
   of its own. */
static PyObject *scan_bounds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "scan_bounds(data) takes 1 argument");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, offset = 0, used = 0, cap = 64;
    int64_t *out = PyMem_Malloc((size_t)cap * 2 * sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    uint32_t length;
    while (offset < n && page_record_valid(d, n, offset, &length)) {
        if (used == cap) {
            cap *= 2;
            int64_t *grown = PyMem_Realloc(out, (size_t)cap * 2 * sizeof(int64_t));
            if (grown == NULL) {
                PyMem_Free(out);
                PyBuffer_Release(&view);
                return PyErr_NoMemory();
            }
            out = grown;
        }
        out[2 * used] = offset + 9;
        out[2 * used + 1] = length;
        used++;
        offset += 10 + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    PyObject *bounds = PyBytes_FromStringAndSize((const char *)out, used * 2 * (Py_ssize_t)sizeof(int64_t));
    PyMem_Free(out);
    if (bounds == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", bounds, offset);
}

/* paged_message(data, start, stop, version, paged_type) -> paged_type or None: the page
   record data[start:stop] (data: any buffer) as store.messaging.message_records.
   PagedMessage.decode's packed path unpacks it, with the same checks (version, a 45 or 30
   record, a queue count >= 0 that ends the record exactly at stop); None for anything else,
   which the Python path then decodes field by field or refuses, naming the fault.
   paged_type's slots are written directly (PAGED_SLOTS). */
static const char *PAGED_SLOTS[] = {"message_id", "tx_id", "record_type", "record", "queue_ids"};
static SlotCache paged_cache;

/* Whether d[start:stop] (of a buffer of n bytes) is a page record PagedMessage.decode's packed
   path accepts (version, a 45 or 30 record, a queue count >= 0 that ends the record exactly at
   stop); its record type, the end of its message record and its queue count when it is. */
static int paged_layout(const unsigned char *d, Py_ssize_t n, Py_ssize_t start, Py_ssize_t stop,
                        long version, unsigned int *kind, Py_ssize_t *end, int32_t *count) {
    /* version u8, message id i64, tx id i64, record type u8, record length u32 (22 bytes) */
    if (start < 0 || stop > n || stop - start < 26 || d[start] != version)
        return 0;
    *kind = d[start + 17];
    *end = start + 22 + (Py_ssize_t)be32(d + start + 18);
    if ((*kind != 30 && *kind != 45) || *end + 4 > stop)
        return 0;
    *count = (int32_t)be32(d + *end);
    return *count >= 0 && stop - (*end + 4) == 8 * (Py_ssize_t)*count;
}

/* The paged message of the record at d + start that paged_layout accepted; NULL with an
   exception set. */
static PyObject *paged_object(PyTypeObject *paged_type, const Py_ssize_t *at,
                              const unsigned char *d, Py_ssize_t start, unsigned int kind,
                              Py_ssize_t end, int32_t count) {
    const unsigned char *h = d + start;
    PyObject *result = NULL;
    PyObject *values[5] = {PyLong_FromLongLong(be64(h + 1)), PyLong_FromLongLong(be64(h + 9)),
                           PyLong_FromLong((long)kind),
                           PyBytes_FromStringAndSize((const char *)h + 22, end - start - 22),
                           queue_ids(d + end + 4, count)};
    if (values[0] != NULL && values[1] != NULL && values[2] != NULL && values[3] != NULL &&
        values[4] != NULL)
        result = new_slotted(paged_type, at, values, 5);
    for (int i = 0; i < 5; i++)
        Py_XDECREF(values[i]);
    return result;
}

/* The slot offsets (PAGED_SLOTS) of paged_type, the argument of function fn, into at;
   -1 with an exception set unless it is a class with those slots. */
static int paged_offsets(PyObject *paged_type, const char *fn, Py_ssize_t *at) {
    if (!PyType_Check(paged_type)) {
        PyErr_Format(PyExc_TypeError, "%s: paged_type must be a class", fn);
        return -1;
    }
    return offsets_of_cached(&paged_cache, (PyTypeObject *)paged_type, PAGED_SLOTS, at, 5);
}

static PyObject *paged_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "paged_message takes 5 arguments");
        return NULL;
    }
    PyTypeObject *paged_type = (PyTypeObject *)args[4];
    Py_ssize_t at[5];
    if (paged_offsets(args[4], "paged_message", at) < 0)
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), stop = PyLong_AsSsize_t(args[2]);
    long version = PyLong_AsLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    unsigned int kind;
    Py_ssize_t end;
    int32_t count;
    PyObject *result = Py_None;
    if (paged_layout(d, view.len, start, stop, version, &kind, &end, &count))
        result = paged_object(paged_type, at, d, start, kind, end, count);
    else
        Py_INCREF(result);
    PyBuffer_Release(&view);
    return result;
}

/* new_paged(paged_type, message_id, tx_id, record_type, record, queue_ids): a paged_type
   with those five slots, made without its __init__ (a frozen dataclass's sets each slot through
   object.__setattr__: about 400 ns of every paged send). The values are taken as given, as
   the dataclass's __init__ takes them. */
static PyObject *new_paged(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "new_paged takes 6 arguments");
        return NULL;
    }
    Py_ssize_t at[5];
    if (paged_offsets(args[0], "new_paged", at) < 0)
        return NULL;
    return new_slotted((PyTypeObject *)args[0], at, (PyObject **)(args + 1), 5);
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void put_be64(unsigned char *p, uint64_t v) {
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

/* frame_page_record(payload) -> bytes or None: store.paging.format.encode_record's framed
   record (0x7b, u32 length, u32 CRC-32 of the length's 4 bytes then the payload, the
   payload, 0x7d), compiled; None for a payload past MAX_RECORD_SIZE (the Python path raises,
   naming it). payload: any buffer. */
static PyObject *frame_page_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "frame_page_record takes 1 argument");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if ((unsigned long long)view.len > 0xFFFFFFFFULL - 10) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, view.len + 10);
    if (out != NULL) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
        o[0] = 0x7B;
        put_be32(o + 1, (uint32_t)view.len);
        uLong crc = fast_crc(zlib_crc(0, o + 1, 4), (const unsigned char *)view.buf, view.len);
        put_be32(o + 5, (uint32_t)crc);
        memcpy(o + 9, view.buf, (size_t)view.len);
        o[9 + view.len] = 0x7D;
    }
    PyBuffer_Release(&view);
    return out;
}

/* paged_record(version, message_id, tx_id, record_type, record, queue_ids) -> bytes or None:
   store.messaging.message_records.PagedMessage.encode's packed record (version u8, message id
   i64, tx id i64, record type u8, record length u32, the record, queue count i32, each queue
   id i64; big-endian), compiled. None when a value does not fit its slot or is not of the
   type expected (record bytes, queue_ids a tuple of int): the Python path raises, naming it.
   record_type is checked by the caller. */
static PyObject *paged_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "paged_record takes 6 arguments");
        return NULL;
    }
    PyObject *record = args[4], *ids = args[5];
    if (!PyBytes_CheckExact(record) || !PyTuple_CheckExact(ids))
        Py_RETURN_NONE;
    int overflow = 0;
    long version = PyLong_AsLongAndOverflow(args[0], &overflow);
    long long mid = overflow ? 0 : PyLong_AsLongLongAndOverflow(args[1], &overflow);
    long long tx = overflow ? 0 : PyLong_AsLongLongAndOverflow(args[2], &overflow);
    long kind = overflow ? 0 : PyLong_AsLongAndOverflow(args[3], &overflow);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(record), count = PyTuple_GET_SIZE(ids);
    if (overflow || version < 0 || version > 255 || kind < 0 || kind > 255 ||
        (unsigned long long)n > 0xFFFFFFFFULL || count > 0x7FFFFFFF)
        Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 22 + n + 4 + 8 * count);
    if (out == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    o[0] = (unsigned char)version;
    put_be64(o + 1, (uint64_t)mid);
    put_be64(o + 9, (uint64_t)tx);
    o[17] = (unsigned char)kind;
    put_be32(o + 18, (uint32_t)n);
    memcpy(o + 22, PyBytes_AS_STRING(record), (size_t)n);
    put_be32(o + 22 + n, (uint32_t)count);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyTuple_GET_ITEM(ids, i);
        long long qid = PyLong_Check(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : 0;
        if (!PyLong_Check(item) || overflow || (qid == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        put_be64(o + 26 + n + 8 * i, (uint64_t)qid);
    }
    return out;
}

/* read_ahead_run(data, bounds, index, end, qid, visible, acked, held, in_memory, page_no,
   want, need, budget, version, paged_type, make_position, found) -> (index, budget, stop):
   store.messaging.pager_cursors.PagerCursors._read_ahead's walk over the records
   index .. end - 1 of one page read whole (data: its bytes; bounds: its records' (offset,
   length) pairs, native int64), compiled. A record is a candidate when it is routed to queue qid, of no
   transaction or one in visible (a dict), its index not in acked and its position
   (page_no, index) in neither held nor in_memory; a candidate is appended to found as
   (make_position((page_no, index)), its paged message, made as paged_message makes it) and
   budget is less its record's length. Stops after the candidate that makes found want long,
   or that leaves budget <= 0 with found at least need long (stop 1); at end (stop 0); at a
   record paged_message's checks refuse (stop 2, index that record: the Python path decodes
   it, and raises naming the fault). index is where the walk stopped: past every record it
   looked at, at the refused one. */
static PyObject *read_ahead_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "read_ahead_run takes 17 arguments");
        return NULL;
    }
    PyObject *visible = args[5], *acked = args[6], *held = args[7], *in_memory = args[8];
    PyObject *page_obj = args[9], *make_position = args[15], *found = args[16];
    if (!PyDict_Check(visible) || !PyAnySet_Check(held) || !PyAnySet_Check(in_memory) ||
        !PyList_Check(found)) {
        PyErr_SetString(PyExc_TypeError, "read_ahead_run: bad argument types");
        return NULL;
    }
    PyTypeObject *paged_type = (PyTypeObject *)args[14];
    Py_ssize_t at[5];
    if (paged_offsets(args[14], "read_ahead_run", at) < 0)
        return NULL;
    Py_ssize_t index = PyLong_AsSsize_t(args[2]), end = PyLong_AsSsize_t(args[3]);
    int64_t qid = PyLong_AsLongLong(args[4]);
    Py_ssize_t want = PyLong_AsSsize_t(args[10]), need = PyLong_AsSsize_t(args[11]);
    Py_ssize_t budget = PyLong_AsSsize_t(args[12]);
    long version = PyLong_AsLong(args[13]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view, pairs;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &pairs, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    const int64_t *bounds = (const int64_t *)pairs.buf;
    Py_ssize_t records = pairs.len / (Py_ssize_t)(2 * sizeof(int64_t));
    int stop = 0, failed = 0;
    if (index < 0 || end > records) {
        PyErr_SetString(PyExc_IndexError, "read_ahead_run: records out of range");
        failed = 1;
    }
    for (; !failed && index < end; index++) {
        Py_ssize_t start = (Py_ssize_t)bounds[2 * index];
        Py_ssize_t stop_at = start + (Py_ssize_t)bounds[2 * index + 1];
        unsigned int kind;
        Py_ssize_t rec_end;
        int32_t count;
        if (!paged_layout(d, view.len, start, stop_at, version, &kind, &rec_end, &count)) {
            stop = 2;
            break;
        }
        const unsigned char *h = d + start;
        int routed = 0;
        for (int32_t i = 0; i < count && !routed; i++)
            routed = be64(d + rec_end + 4 + 8 * (Py_ssize_t)i) == qid;
        if (!routed)
            continue;
        int64_t tx_id = be64(h + 9);
        PyObject *tx = NULL, *idx = NULL, *pair = NULL;
        int skip = 0;
        if (tx_id != 0) {
            tx = PyLong_FromLongLong(tx_id);
            int seen = tx == NULL ? -1 : PyDict_Contains(visible, tx);
            skip = seen < 0 ? -1 : !seen;
            Py_XDECREF(tx);
        }
        if (skip == 0) {
            idx = PyLong_FromSsize_t(index);
            skip = idx == NULL ? -1 : PySequence_Contains(acked, idx);
        }
        if (skip == 0) {
            pair = PyTuple_Pack(2, page_obj, idx);
            skip = pair == NULL ? -1 : PySet_Contains(held, pair);
            if (skip == 0)
                skip = PySet_Contains(in_memory, pair);
        }
        Py_XDECREF(idx);
        if (skip != 0) {
            Py_XDECREF(pair);
            if (skip < 0)
                failed = 1;
            continue;
        }
        PyObject *position = PyObject_CallOneArg(make_position, pair);
        Py_DECREF(pair);
        PyObject *paged = NULL, *item = NULL;
        if (position != NULL)
            paged = paged_object(paged_type, at, d, start, kind, rec_end, count);
        if (paged != NULL)
            item = PyTuple_Pack(2, position, paged);
        Py_XDECREF(position);
        Py_XDECREF(paged);
        if (item == NULL || PyList_Append(found, item) < 0) {
            Py_XDECREF(item);
            failed = 1;
            break;
        }
        Py_DECREF(item);
        budget -= rec_end - start - 22;
        Py_ssize_t have = PyList_GET_SIZE(found);
        if (have >= want || (budget <= 0 && have >= need)) {
            index++;
            stop = 1;
            break;
        }
    }
    PyBuffer_Release(&pairs);
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    return Py_BuildValue("(nni)", index, budget, stop);
}

/* plain_message(data, message_id, message_type, addresses, version, default_type) ->
   message_type or None: the Message of an ADD_MESSAGE_PROTOCOL body (bytes) without
   properties, as store.messaging.packed.unpack_message gives it, made without running its
   __init__: only a body peek_message accepts (the same checks: every field valid, the body
   exactly to the end), whose Message.__post_init__ would change nothing and raise nothing.
   Its fields are set in the order of the dataclass's __init__ (the instance's attribute
   layout is then the one every Message shares). None for anything else: the Python path
   decides. addresses caches the decoded address of each raw address. */
static PyObject *field_names[13];
static PyObject *empty_args;

static PyObject *plain_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "plain_message takes 6 arguments");
        return NULL;
    }
    PyObject *data = args[0], *addresses = args[3], *default_type = args[5];
    if (!PyBytes_CheckExact(data) || !PyType_Check(args[2]) || !PyDict_CheckExact(addresses)) {
        PyErr_SetString(PyExc_TypeError,
                        "plain_message: data must be bytes, message_type a class, addresses a dict");
        return NULL;
    }
    long version = PyLong_AsLong(args[4]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    if (field_names[0] == NULL) {
        static const char *names[13] = {"address", "body", "durable", "priority", "expiration",
                                        "timestamp", "scheduled_delivery", "properties",
                                        "message_type", "user_id", "property_types",
                                        "message_id", "_opener"};
        for (int i = 0; i < 13; i++) {
            field_names[i] = PyUnicode_InternFromString(names[i]);
            if (field_names[i] == NULL)
                return NULL;
        }
    }
    /* peek_header makes every check; it gives address, priority, durable, scheduled. */
    PyObject *header = peek_header(data, addresses, &PyTuple_Type, version);
    if (header == NULL || header == Py_None)
        return header;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    Py_ssize_t end = 5 + (Py_ssize_t)be32(d + 1);
    const unsigned char *f = d + end;
    PyObject *obj = NULL;
    PyObject *values[13] = {NULL};
    values[0] = PyTuple_GET_ITEM(header, 0);
    Py_INCREF(values[0]);
    values[1] = PyBytes_FromStringAndSize((const char *)d + end + 34, n - end - 34);
    values[2] = PyTuple_GET_ITEM(header, 2);
    Py_INCREF(values[2]);
    values[3] = PyTuple_GET_ITEM(header, 1);
    Py_INCREF(values[3]);
    values[4] = PyLong_FromLongLong(be64(f + 10));
    values[5] = PyLong_FromLongLong(be64(f + 2));
    values[6] = PyTuple_GET_ITEM(header, 3);
    Py_INCREF(values[6]);
    values[7] = PyDict_New();
    values[8] = default_type;
    Py_INCREF(values[8]);
    values[9] = Py_None;
    Py_INCREF(Py_None);
    values[10] = PyDict_New();
    values[11] = args[1];
    Py_INCREF(values[11]);
    values[12] = Py_None;
    Py_INCREF(Py_None);
    Py_DECREF(header);
    for (int i = 0; i < 13; i++)
        if (values[i] == NULL)
            goto done;
    PyTypeObject *type = (PyTypeObject *)args[2];
    /* Through tp_new (object.__new__, no arguments), not tp_alloc alone: it also gives the
       instance its inline attribute values (CPython 3.11+), so the sets below are a store
       into them, as the dataclass's own __init__ makes; after tp_alloc alone every set went
       through a dict made for the instance, slower and larger. */
    if (empty_args == NULL && (empty_args = PyTuple_New(0)) == NULL)
        goto done;
    obj = type->tp_new(type, empty_args, NULL);
    if (obj == NULL)
        goto done;
    for (int i = 0; i < 13; i++) {
        if (PyObject_GenericSetAttr(obj, field_names[i], values[i]) < 0) {
            Py_CLEAR(obj);
            goto done;
        }
    }
done:
    for (int i = 0; i < 13; i++)
        Py_XDECREF(values[i]);
    return obj;
}

static PyMethodDef methods[] = {
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     "append_record(buf, rtype, user_type, flags, file_id, lsn, durable_lsn, id, tx_id, "
     "tx_count, data) -> None: one whole record appended to the bytearray buf."},
    {"append_records_run", (PyCFunction)(void (*)(void))append_records_run, METH_FASTCALL,
     "append_records_run(buf, rtype, flags, file_id, first_lsn, durable_lsn, ids, start, stop, "
     "tx_id) -> None: append_record of each id of ids[start:stop], without a body, in one "
     "call."},
    {"crc32", (PyCFunction)(void (*)(void))py_crc32, METH_FASTCALL,
     "crc32(data, value=0) -> int: zlib.crc32's answer, folded with PCLMULQDQ where the CPU "
     "has it."},
    {"peek_message", (PyCFunction)(void (*)(void))peek_message, METH_FASTCALL,
     "peek_message(data, addresses, header_type, version) -> header or None: "
     "store.messaging.message_records.peek_message, compiled."},
    {"replay_adds", (PyCFunction)(void (*)(void))replay_adds, METH_FASTCALL,
     "replay_adds(records, start, entries, index, info_type, live, updated_only, file_key, "
     "add, update) -> (stop, count, live_bytes): a run of ADD and UPDATE records replayed, "
     "as store.file.reader.replay_file."},
    {"replay_message_run", (PyCFunction)(void (*)(void))replay_message_run, METH_FASTCALL,
     "replay_message_run(records, start, end, messages, queue_entries, orders, addresses, "
     "header_type, version, add_ref, add_message, loaded_type, entry_type, ready) -> (stop, "
     "highest): the messaging load's inline replay of message and ref records, compiled."},
    {"keep_run", (PyCFunction)(void (*)(void))keep_run, METH_FASTCALL,
     "keep_run(messages, queues, kept, memory, loaded_type, stored_type, other) -> None: the "
     "messaging load's keeping of loaded messages, compiled."},
    {"add_entries_run", (PyCFunction)(void (*)(void))add_entries_run, METH_FASTCALL,
     "add_entries_run(entries, by_id, ready, scheduled, now, entry_type, ready_state, "
     "scheduled_state) -> None: MessageQueue.add_entries's loop, compiled."},
    {"replay_rows", (PyCFunction)(void (*)(void))replay_rows, METH_FASTCALL,
     "replay_rows(rows, start, entries, index, info_type, live, updated_only, file_key, add, "
     "update, empty, plain) -> stop: "
     "a run of a database journal's ADD and UPDATE rows replayed, as store.db.journal."},
    {"scan_replay", (PyCFunction)(void (*)(void))scan_replay, METH_FASTCALL,
     "scan_replay(data, file_id, start, floor, pad_unit, entries, index, info_type, live, "
     "updated_only, file_key, add, update, other) -> (end, last_lsn, count, first_lsn, "
     "positives, live_bytes): scan and replay_adds in one pass, as store.file.reader."},
    {"scan_page", (PyCFunction)(void (*)(void))scan_page, METH_FASTCALL,
     "scan_page(data) -> (records, offset): a page's valid records up to the first invalid "
     "one, as store.paging.format.scan_page."},
    {"scan_bounds", (PyCFunction)(void (*)(void))scan_bounds, METH_FASTCALL,
     "scan_bounds(data) -> (bounds, offset): scan_page's records as (offset, length) pairs of "
     "native int64 in bounds."},
    {"paged_runs_in", (PyCFunction)(void (*)(void))paged_runs_in, METH_FASTCALL,
     "paged_runs_in(data, bounds, version) -> (runs, large) or None: paged_runs over the "
     "records scan_bounds located."},
    {"paged_runs", (PyCFunction)(void (*)(void))paged_runs, METH_FASTCALL,
     "paged_runs(records, version) -> (runs, large) or None: runs of paged messages, as "
     "store.messaging.page_scan.python_paged_runs."},
    {"frame_page_record", (PyCFunction)(void (*)(void))frame_page_record, METH_FASTCALL,
     "frame_page_record(payload) -> bytes or None: store.paging.format.encode_record, "
     "compiled."},
    {"paged_record", (PyCFunction)(void (*)(void))paged_record, METH_FASTCALL,
     "paged_record(version, message_id, tx_id, record_type, record, queue_ids) -> bytes or "
     "None: PagedMessage.encode's packed path, compiled."},
    {"read_ahead_run", (PyCFunction)(void (*)(void))read_ahead_run, METH_FASTCALL,
     "read_ahead_run(data, bounds, index, end, qid, visible, acked, held, in_memory, page_no, "
     "want, need, budget, version, paged_type, make_position, found) -> (index, budget, stop): "
     "Pager._read_ahead's walk over one page's records, compiled."},
    {"paged_message", (PyCFunction)(void (*)(void))paged_message, METH_FASTCALL,
     "paged_message(data, start, stop, version, paged_type) -> paged_type or None: "
     "PagedMessage.decode's packed path, compiled."},
    {"new_paged", (PyCFunction)(void (*)(void))new_paged, METH_FASTCALL,
     "new_paged(paged_type, message_id, tx_id, record_type, record, queue_ids) -> paged_type: "
     "PagedMessage(...) without its __init__."},
    {"plain_message", (PyCFunction)(void (*)(void))plain_message, METH_FASTCALL,
     "plain_message(data, message_id, message_type, addresses, version, default_type) -> "
     "message_type or None: a Message without properties, as unpack_message decodes it."},
    {"scan", scan, METH_VARARGS,
     "scan(data, file_id, start, floor, pad_unit) -> (records, end, last_lsn, count): the "
     "records in sequence, as store.file.reader.scan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled per-record loops of the file journal (see store.speedups).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
#ifdef HAVE_CLMUL_CODE
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    have_vclmul = have_clmul && __builtin_cpu_supports("vpclmulqdq") &&
                  __builtin_cpu_supports("avx512f");
    const char *no_wide = getenv("STORE_NO_WIDE_CRC");
    if (no_wide != NULL && strcmp(no_wide, "1") == 0) { /* "1", as STORE_NO_SPEEDUPS */
        have_vclmul = 0; /* the 128-bit loop alone: for the tests and the benchmarks */
    }
#endif
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "CLMUL", have_clmul) < 0 ||
                      PyModule_AddIntConstant(m, "WIDE_CLMUL", have_vclmul) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
