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

static PyMethodDef methods[] = {
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
