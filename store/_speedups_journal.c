/* store._speedups: the file journal's records, compiled (issue: speed of the journal's hot
 * paths). Reference: store.file.reader (python_scan) and store.file.journal (FileJournal's
 * append path: _check_fields, RECORD_HEAD.pack, zlib.crc32, RECORD_TAIL.pack). The scan applies
 * exactly the same rules as python_scan (store.file.format: "a record is valid if and only if
 * ...", "in sequence", "end of data", the two padding rules) and returns exactly the same
 * records; the tests run both over the same files and compare (tests/file/test_speedups.py;
 * append_records_run against the append path's Python steps: tests/file/test_compiled_append.py).
 *
 * scan(data, file_id, start, floor, pad_unit) -> (records, end, last_lsn, count)
 *   data      a bytes-like object (the whole file)
 *   records   list of (offset, length, type, user_type, compact_count, lsn, id, tx_id,
 *             tx_count, body) tuples, body a bytes object
 *   Its loop (scan_loop) also serves scan_replay (_speedups_load.c), whose sink replays the
 *   adds and updates instead of making raw records of them.
 *
 * append_record(buf, rtype, user_type, flags, file_id, lsn, durable_lsn, id, tx_id, tx_count,
 *               data) -> None
 *   appends one whole record (head, body, tail) to the bytearray buf, as the Python append path
 *   does with its argument checks, zlib.crc32, RECORD_HEAD.pack, two concatenations and
 *   RECORD_TAIL.pack. An id or tx_id outside signed 64 bits, or a user_type outside 0..255, is
 *   the ValueError the Python path raises, with its message; buf is then left as it was.
 *   append_records_run appends a run of records without a body in one call.
 *
 * Record head (little-endian, 52 bytes): length u32, type u8, user_type u8, compact_count u8,
 * flags u8, file_id u64, lsn u64, durable_lsn u64, id i64, tx_id i64, tx_count u32; then the
 * body; then the tail: checksum u32 (CRC-32 of the body, continued over the head), length u32.
 */
#include "_speedups.h"

#define HEAD 52
#define OVERHEAD 60

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p) {
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

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
int scan_loop(const unsigned char *data, Py_ssize_t size, unsigned long long file_id,
              Py_ssize_t start, int floor, Py_ssize_t pad_unit, Sink *sink, Py_ssize_t *end,
              uint64_t *last_lsn_out, long long *count_out, uint64_t *first_lsn) {
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

PyObject *scan(PyObject *self, PyObject *args) {
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

PyObject *append_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 11, "append_record takes 11 arguments") < 0)
        return NULL;
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
PyObject *append_records_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 10, "append_records_run takes 10 arguments") < 0)
        return NULL;
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
