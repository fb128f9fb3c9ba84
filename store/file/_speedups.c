/* The per-record loop of store.file.reader.scan, compiled (issue: speed of the journal's hot
 * paths). The pure-Python scan in reader.py is the reference: this function applies exactly the
 * same rules (store.file.format: "a record is valid if and only if ...", "in sequence", "end of
 * data", the two padding rules) and returns exactly the same records; the tests run both over
 * the same files and compare. Built by setup.py as an optional extension: without a compiler
 * the package falls back to the Python loop.
 *
 * scan(data, file_id, start, floor, pad_unit) -> (records, end, last_lsn, count)
 *   data      a bytes-like object (the whole file)
 *   records   list of (offset, length, type, user_type, compact_count, lsn, id, tx_id,
 *             tx_count, body) tuples, body a bytes object
 *
 * append_record(buf, rtype, user_type, flags, file_id, lsn, durable_lsn, id, tx_id, tx_count,
 *               data, body_crc) -> None
 *   appends one whole record (head, body, tail) to the bytearray buf, as the Python append path
 *   does with RECORD_HEAD.pack, two concatenations and RECORD_TAIL.pack; body_crc is the
 *   CRC-32 of data, computed by the caller outside its lock.
 *
 * Record head (little-endian, 52 bytes): length u32, type u8, user_type u8, compact_count u8,
 * flags u8, file_id u64, lsn u64, durable_lsn u64, id i64, tx_id i64, tx_count u32; then the
 * body; then the tail: checksum u32 (CRC-32 of the body, continued over the head), length u32.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#define HEAD 52
#define OVERHEAD 60

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p) {
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long file_id;
    Py_ssize_t start, pad_unit;
    int floor;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Knin", &view, &file_id, &start, &floor, &pad_unit))
        return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t pos = start, padded_from = -1, data_end = size;
    uint64_t last_lsn = 0;
    long long count = 0;
    /* Everything from data_end on is zeros: lets the padding rule stop without a search. */
    while (data_end > 0 && data[data_end - 1] == 0)
        data_end--;
    int failed = 0;
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
            const unsigned char *end = h + length;
            uint32_t crc = rd32(end - 8), length_copy = rd32(end - 4);
            if (length_copy == length) {
                uLong c = crc32(0L, h + HEAD, (uInt)(length - OVERHEAD));
                c = crc32(c, h, HEAD);
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
        PyObject *rec = PyTuple_New(10);
        if (rec == NULL) {
            failed = 1;
            break;
        }
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
        for (int i = 0; i < 10; i++) {
            if (items[i] == NULL)
                failed = 1;
            PyTuple_SET_ITEM(rec, i, items[i]); /* steals; a NULL slot is freed safely */
        }
        if (failed || PyList_Append(out, rec) < 0) {
            Py_DECREF(rec);
            failed = 1;
            break;
        }
        Py_DECREF(rec);
        last_lsn = lsn;
        count++;
        pos += length;
        padded_from = -1;
    }
    PyBuffer_Release(&view);
    if (failed) {
        Py_DECREF(out);
        return NULL;
    }
    if (padded_from >= 0)
        pos = padded_from;
    return Py_BuildValue("(NnKL)", out, pos, (unsigned long long)last_lsn, count);
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

static PyObject *append_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "append_record takes 12 arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "append_record: buf must be a bytearray");
        return NULL;
    }
    unsigned long fields[3];
    for (int i = 0; i < 3; i++) {
        fields[i] = PyLong_AsUnsignedLong(args[1 + i]);
        if (fields[i] == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (fields[i] > 255) {
            PyErr_SetString(PyExc_OverflowError, "append_record: a byte field is over 255");
            return NULL;
        }
    }
    unsigned long long file_id = PyLong_AsUnsignedLongLong(args[4]);
    unsigned long long lsn = PyLong_AsUnsignedLongLong(args[5]);
    unsigned long long dlsn = PyLong_AsUnsignedLongLong(args[6]);
    long long rid = PyLong_AsLongLong(args[7]);
    long long tx_id = PyLong_AsLongLong(args[8]);
    unsigned long tx_count = PyLong_AsUnsignedLong(args[9]);
    unsigned long body_crc = PyLong_AsUnsignedLong(args[11]);
    if (PyErr_Occurred())
        return NULL;
    if (tx_count > 0xFFFFFFFFUL || body_crc > 0xFFFFFFFFUL) {
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
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, at + n) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *h = (unsigned char *)PyByteArray_AS_STRING(buf) + at;
    wr32(h, (uint32_t)n);
    h[4] = (unsigned char)fields[0];
    h[5] = (unsigned char)fields[1];
    h[6] = 0;
    h[7] = (unsigned char)fields[2];
    wr64(h + 8, file_id);
    wr64(h + 16, lsn);
    wr64(h + 24, dlsn);
    wr64(h + 32, (uint64_t)rid);
    wr64(h + 40, (uint64_t)tx_id);
    wr32(h + 48, (uint32_t)tx_count);
    if (data.len)
        memcpy(h + HEAD, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    uLong crc = crc32((uLong)body_crc, h, HEAD);
    wr32(h + n - 8, (uint32_t)crc);
    wr32(h + n - 4, (uint32_t)n);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     "append_record(buf, rtype, user_type, flags, file_id, lsn, durable_lsn, id, tx_id, "
     "tx_count, data, body_crc) -> None: one whole record appended to the bytearray buf."},
    {"scan", scan, METH_VARARGS,
     "scan(data, file_id, start, floor, pad_unit) -> (records, end, last_lsn, count): the "
     "records in sequence, as store.file.reader.scan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled per-record loops of the file journal (see store.file.reader).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
