package store.reporting.jvm;

import java.util.Base64;

/** store.reporting.decode.decode_body: the 13 decoded columns of one journal record (address,
 *  name, queue_id, timestamp, priority, body_size, large, error, page, page_index,
 *  page_tx_id, orig_address, expiry_move), null where Python leaves a key out. A body Python refuses gives only
 *  {@code error}: the sentinel {@code "\u0000jvm:" + base64(body)}, which the Python side turns
 *  into Python's own text. Pure static functions. */
final class RecordDecoder {
    private RecordDecoder() {}

    static final int COLUMNS = 13;
    static final int ADDRESS = 0, NAME = 1, QUEUE_ID = 2, TIMESTAMP = 3, PRIORITY = 4,
        BODY_SIZE = 5, LARGE = 6, ERROR = 7, PAGE = 8, PAGE_INDEX = 9, PAGE_TX_ID = 10,
        ORIG_ADDRESS = 11, EXPIRY_MOVE = 12;
    /** The prefix of the error sentinel. */
    static final String SENTINEL = "\u0000jvm:";
    private static final byte[] EMPTY = new byte[0];

    // store.journal.api record types with a body (decode._WITH_BODY)
    static final int ADD = 11, UPDATE = 12, ADD_TX = 13, UPDATE_TX = 14;
    // store.messaging.records / page_records user record types
    static final int QUEUE_BINDING = 21, ADDRESS_BINDING = 44, ADD_REF = 32, ACKNOWLEDGE_REF = 33,
        UPDATE_DELIVERY_COUNT = 34, SET_SCHEDULED_DELIVERY_TIME = 36, DUPLICATE_ID = 37,
        PAGE_TRANSACTION = 35, ACKNOWLEDGE_CURSOR = 39, PAGE_CURSOR_COMPLETE = 42;

    /** The columns of a record of journal {@code journal} ("bindings", else the message
     *  journal's rules), record type {@code kind}, user record type {@code urt} (either may be
     *  null: nothing is read) and body {@code body} (null: empty). Never throws for a bad body. */
    static Object[] decode(String journal, Number kind, Number urt, byte[] body) {
        Object[] out = new Object[COLUMNS];
        if (kind == null || urt == null) return out;
        long k = kind.longValue();
        if (k != ADD && k != UPDATE && k != ADD_TX && k != UPDATE_TX) return out;
        long u = urt.longValue();
        byte[] d = body == null ? EMPTY : body;
        try {
            if ("bindings".equals(journal)) bindings(u, d, out);
            else messages(k, u, d, out);
        } catch (BadRecord | IndexOutOfBoundsException e) {
            java.util.Arrays.fill(out, null);
            out[ERROR] = SENTINEL + Base64.getEncoder().encodeToString(d);
        }
        return out;
    }

    /** {@link #decode}'s columns of a message record read in place from d[o, o+len), into
     *  out[base, base+COLUMNS), when it is a message the fast summary reads (kind an add or
     *  update, the message journal, a version-1 body without properties): true; else false
     *  and nothing written (decode a copy of the body then). Never throws. */
    static boolean fastMessage(String journal, int kind, int urt, byte[] d, int o, int len,
                               Object[] out, int base) {
        if (kind != ADD && kind != UPDATE && kind != ADD_TX && kind != UPDATE_TX) return false;
        if (urt != MessageCodec.INLINE && urt != MessageCodec.LARGE || "bindings".equals(journal))
            return false;
        Object[] s = MessageCodec.fastSummary(d, o, len, urt);
        if (s == null) return false;
        out[base + ADDRESS] = s[0];
        out[base + TIMESTAMP] = s[1];
        out[base + PRIORITY] = s[2];
        out[base + BODY_SIZE] = s[3];
        out[base + LARGE] = urt == MessageCodec.LARGE;
        out[base + EXPIRY_MOVE] = Boolean.FALSE;  // no properties: never moved
        return true;
    }

    private static void bindings(long u, byte[] d, Object[] out) {
        if (u == QUEUE_BINDING) {
            BodyReader r = new BodyReader(d, 1);
            String name = r.text(), address = r.text();
            routingType(r.text());
            r.optionalText();
            r.done();
            out[NAME] = name;
            out[ADDRESS] = address;
        } else if (u == ADDRESS_BINDING) {
            BodyReader r = new BodyReader(d, 1);
            String name = r.text();
            int count = r.u8();
            for (int i = 0; i < count; i++) routingType(r.text());
            r.done();
            out[ADDRESS] = name;
        }
    }

    private static void routingType(String value) {
        BadRecord.check(value.equals("ANYCAST") || value.equals("MULTICAST"));
    }

    /** A fixed-size body: version 1 and exactly {@code size} bytes (Reader + done, or
     *  decode_page_record's length and version checks). */
    private static void fixed(byte[] d, int size) {
        BadRecord.check(d.length == size && d[0] == 1);
    }

    private static void messages(long k, long u, byte[] d, Object[] out) {
        if (u == MessageCodec.INLINE || u == MessageCodec.LARGE) {
            Object[] s = MessageCodec.summary(d, (int) u);
            out[ADDRESS] = s[0];
            out[TIMESTAMP] = s[1];
            out[PRIORITY] = s[2];
            out[BODY_SIZE] = s[3];
            out[LARGE] = u == MessageCodec.LARGE;
            out[ORIG_ADDRESS] = s[4];
            out[EXPIRY_MOVE] = s[5];
        } else if (u == ADD_REF || u == ACKNOWLEDGE_REF) {
            fixed(d, 9);
            out[QUEUE_ID] = Bytes.i64be(d, 1);
        } else if (u == UPDATE_DELIVERY_COUNT) {
            fixed(d, 13);
            out[QUEUE_ID] = Bytes.i64be(d, 1);
        } else if (u == SET_SCHEDULED_DELIVERY_TIME) {
            fixed(d, 17);
            out[QUEUE_ID] = Bytes.i64be(d, 1);
        } else if (u == DUPLICATE_ID) {
            BodyReader r = new BodyReader(d, 1);
            String address = r.text();
            r.raw();
            r.done();
            out[ADDRESS] = address;
        } else if (u == ACKNOWLEDGE_CURSOR) {
            fixed(d, 21);  // >Bqqi
            out[QUEUE_ID] = Bytes.i64be(d, 1);
            out[PAGE] = Bytes.i64be(d, 9);
            out[PAGE_INDEX] = Bytes.i32be(d, 17);
        } else if (u == PAGE_CURSOR_COMPLETE) {
            fixed(d, 21);  // >Bqqi
            out[QUEUE_ID] = Bytes.i64be(d, 1);
            out[PAGE] = Bytes.i64be(d, 9);
        } else if (u == PAGE_TRANSACTION && (k == ADD || k == ADD_TX)) {  // the update form names no tx
            fixed(d, 13);  // >Bqi
            out[PAGE_TX_ID] = Bytes.i64be(d, 1);
        }
    }
}
