/* store._speedups: page records and paged messages, compiled: what a messaging load reads of
 * every page, what a paged send writes and what a receive of a deep queue reads ahead.
 * References: store.paging.format (scan_page, scan_records, python_encode_record),
 * store.messaging.page_scan (python_paged_runs), store.messaging.message_records
 * (PagedMessage.decode and write_packed, python_new_paged) and store.messaging.pager_cursors
 * (PagerCursors._read_ahead's walk, which store.messaging.page_cache hands here). Tests:
 * tests/messaging/test_page_scan.py, tests/messaging/test_paged_decode.py,
 * tests/messaging/test_read_ahead.py, tests/messaging/test_compiled_paged_record.py,
 * tests/paging/test_compiled_framing.py.
 *
 * scan_page(data[, binding]) -> (records, offset): store.paging.format.scan_page's loop over
 * the records of a page's bytes (big-endian framing: 0x7B, length u32, CRC-32 of the length's
 * 4 bytes and the payload, payload, 0x7D; a record bound to its page starts with 0x5B and its
 * CRC continues over the page's binding), the payloads as bytes objects, up to the first
 * record that is not valid (a bound one is invalid without the binding it was written with); offset is where that record starts (len(data) when every record is valid). The
 * Python code decides what an invalid record means (a torn tail or a CorruptionError).
 * scan_bounds(data[, binding]) -> (bounds, offset) is the same loop for scan_records: each payload as a
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
#include "_speedups.h"

/* A page's binding (store.paging.format.page_binding) as given to scan_page, scan_bounds and
   frame_page_record: absent or None (len -1) for none. */
typedef struct {
    Py_buffer view;
    const unsigned char *p;
    Py_ssize_t len;
} Binding;

/* Read the optional binding argument (args[1] when nargs is 2); -1 with an exception set. */
static int binding_get(Binding *b, PyObject *const *args, Py_ssize_t nargs, const char *usage) {
    b->p = NULL;
    b->len = -1;
    if (nargs != 1 && nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    if (nargs == 1 || args[1] == Py_None)
        return 0;
    if (PyObject_GetBuffer(args[1], &b->view, PyBUF_SIMPLE) < 0)
        return -1;
    b->p = (const unsigned char *)b->view.buf;
    b->len = b->view.len;
    return 0;
}

static void binding_release(Binding *b) {
    if (b->len >= 0)
        PyBuffer_Release(&b->view);
}

/* Whether a valid page record starts at offset of d (n bytes): framing, length and CRC-32
   (store.paging.format); its payload length in *length when it is. A bound record (0x5B)
   is valid only with the binding its CRC ends with. */
static int page_record_valid(const unsigned char *d, Py_ssize_t n, Py_ssize_t offset,
                             uint32_t *length, const Binding *b) {
    if (n - offset < 10)
        return 0;
    unsigned char start = d[offset];
    if (start != 0x7B && (start != 0x5B || b->len < 0))
        return 0;
    *length = be32(d + offset + 1);
    if ((uint64_t)*length > (uint64_t)(n - offset - 10))
        return 0;
    const unsigned char *payload = d + offset + 9;
    uLong crc = fast_crc(fast_crc(0, d + offset + 1, 4), payload, (Py_ssize_t)*length);
    if (start == 0x5B)
        crc = zlib_crc(crc, b->p, b->len);
    return (uint32_t)crc == be32(d + offset + 5) && payload[*length] == 0x7D;
}

PyObject *scan_page(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Binding b;
    if (binding_get(&b, args, nargs, "scan_page(data[, binding]) takes 1 or 2 arguments") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        binding_release(&b);
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, offset = 0;
    PyObject *records = PyList_New(0);
    if (records == NULL) {
        PyBuffer_Release(&view);
        binding_release(&b);
        return NULL;
    }
    uint32_t length;
    while (offset < n && page_record_valid(d, n, offset, &length, &b)) {
        const unsigned char *payload = d + offset + 9;
        PyObject *record = PyBytes_FromStringAndSize((const char *)payload, (Py_ssize_t)length);
        if (record == NULL || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            Py_DECREF(records);
            PyBuffer_Release(&view);
            binding_release(&b);
            return NULL;
        }
        Py_DECREF(record);
        offset += 10 + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    binding_release(&b);
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

PyObject *paged_runs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
PyObject *paged_runs_in(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 3, "paged_runs_in(data, bounds, version) takes 3 arguments") < 0)
        return NULL;
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
PyObject *scan_bounds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Binding b;
    if (binding_get(&b, args, nargs, "scan_bounds(data[, binding]) takes 1 or 2 arguments") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        binding_release(&b);
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, offset = 0, used = 0, cap = 64;
    int64_t *out = PyMem_Malloc((size_t)cap * 2 * sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&view);
        binding_release(&b);
        return PyErr_NoMemory();
    }
    uint32_t length;
    while (offset < n && page_record_valid(d, n, offset, &length, &b)) {
        if (used == cap) {
            cap *= 2;
            int64_t *grown = PyMem_Realloc(out, (size_t)cap * 2 * sizeof(int64_t));
            if (grown == NULL) {
                PyMem_Free(out);
                PyBuffer_Release(&view);
                binding_release(&b);
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
    binding_release(&b);
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

PyObject *paged_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 5, "paged_message takes 5 arguments") < 0)
        return NULL;
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
PyObject *new_paged(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 6, "new_paged takes 6 arguments") < 0)
        return NULL;
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

/* frame_page_record(payload[, binding]) -> bytes or None: store.paging.format.encode_record's
   framed record (0x7b, u32 length, u32 CRC-32 of the length's 4 bytes then the payload, the
   payload, 0x7d; with a binding 0x5b and the CRC continued over the binding), compiled; None
   for a payload past MAX_RECORD_SIZE (the Python path raises, naming it). payload and
   binding: any buffer. */
PyObject *frame_page_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Binding b;
    if (binding_get(&b, args, nargs, "frame_page_record takes 1 or 2 arguments") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        binding_release(&b);
        return NULL;
    }
    if ((unsigned long long)view.len > 0xFFFFFFFFULL - 10) {
        PyBuffer_Release(&view);
        binding_release(&b);
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, view.len + 10);
    if (out != NULL) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
        o[0] = b.len >= 0 ? 0x5B : 0x7B;
        put_be32(o + 1, (uint32_t)view.len);
        uLong crc = fast_crc(zlib_crc(0, o + 1, 4), (const unsigned char *)view.buf, view.len);
        if (b.len >= 0)
            crc = zlib_crc(crc, b.p, b.len);
        put_be32(o + 5, (uint32_t)crc);
        memcpy(o + 9, view.buf, (size_t)view.len);
        o[9 + view.len] = 0x7D;
    }
    PyBuffer_Release(&view);
    binding_release(&b);
    return out;
}

/* paged_record(version, message_id, tx_id, record_type, record, queue_ids) -> bytes or None:
   store.messaging.message_records.PagedMessage.encode's packed record (version u8, message id
   i64, tx id i64, record type u8, record length u32, the record, queue count i32, each queue
   id i64; big-endian), compiled. None when a value does not fit its slot or is not of the
   type expected (record bytes, queue_ids a tuple of int): the Python path raises, naming it.
   record_type is checked by the caller. */
PyObject *paged_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 6, "paged_record takes 6 arguments") < 0)
        return NULL;
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
PyObject *read_ahead_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 17, "read_ahead_run takes 17 arguments") < 0)
        return NULL;
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
