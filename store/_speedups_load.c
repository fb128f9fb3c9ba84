/* store._speedups: a load's replay, and the messaging layer's message records, compiled.
 * References, each the Python code it is tested against and the fallback:
 *
 * replay_adds(records, start, ...), replay_rows(rows, start, ...) and scan_replay(data, ...):
 *   the journal load's replay of ADD and UPDATE records into a Replayer and a LiveIndex, with
 *   the rules of store.file.reader.replay_file (replay_adds, over raw records: the compactor
 *   and offline tools), of store.file.reader.scan_and_replay (scan_replay: the scan of
 *   _speedups_journal.c and the replay in one pass, an ADD or UPDATE replayed as it is read,
 *   never becoming a raw record; any other record handed as one to other(record), in file
 *   order) and of store.db.journal / store.db.row_replay (replay_rows, over a database
 *   journal's rows). Tests: tests/file/test_compiled_replay.py, tests/file/test_speedups.py,
 *   tests/db/test_journal.py.
 *
 * peek_message(data, addresses, header_type, version), replay_message_run(records, start,
 * end, ...), keep_run(messages, ...), add_entries_run(entries, ...) and plain_message(data,
 * ...): the messaging load's look at a message record without decoding it
 * (store.messaging.message_records.peek_message), its loop over the two records of every
 * message (store.messaging.recovery.replay_messages), its keeping of the loaded messages
 * (store.messaging.loader._messages), its filling of each queue
 * (store.messaging.queues.MessageQueue.add_entries) and a Message without properties made as
 * store.messaging.packed.unpack_message makes it. Tests: tests/messaging/test_replay.py,
 * tests/messaging/test_records.py.
 */
#include "_speedups.h"

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
int replay_positive(Sink *s, PyObject *rid, PyObject *urt, PyObject *body, int is_update,
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
PyObject *replay_adds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 10, "replay_adds takes 10 arguments") < 0)
        return NULL;
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
PyObject *replay_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 12, "replay_rows takes 12 arguments") < 0)
        return NULL;
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
PyObject *scan_replay(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 14, "scan_replay takes 14 arguments") < 0)
        return NULL;
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
PyObject *peek_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 4, "peek_message takes 4 arguments") < 0)
        return NULL;
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

static SlotCache loaded_cache, entry_cache, stored_cache;

PyObject *replay_message_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 14, "replay_message_run takes 14 arguments") < 0)
        return NULL;
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

PyObject *keep_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 7, "keep_run takes 7 arguments") < 0)
        return NULL;
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
PyObject *add_entries_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 8, "add_entries_run takes 8 arguments") < 0)
        return NULL;
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

PyObject *plain_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 6, "plain_message takes 6 arguments") < 0)
        return NULL;
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
