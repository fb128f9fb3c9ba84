package store.reporting.jvm;

import java.util.HashMap;
import java.util.Map;

/** store.messaging.message_facts.message_summary: (address, timestamp, priority, body size)
 *  of an ADD_MESSAGE_PROTOCOL (45) or ADD_LARGE_MESSAGE (30) body, with every check of the
 *  Python decode (read_message / decode_large_message and Message's construction checks);
 *  a body Python refuses throws {@link BadRecord}. Pure static functions. */
final class MessageCodec {
    private MessageCodec() {}

    static final int INLINE = 45, LARGE = 30;
    private static final int HEAD = 5, FIXED = 30;
    /** Python types of property values (store.messaging.values._TYPES_OF keys). */
    private static final Object NONE = new Object(), BYTES = new Object();
    /** values.PROPERTY_TYPES, in order (a typed null names its type by index). */
    private static final String[] PROPERTY_TYPES = {
        "boolean", "byte", "short", "integer", "long", "float", "double", "string",
        "simple-string", "bytes",
    };
    private static final String[] BOOL_TYPES = {"boolean"};
    private static final String[] INT_TYPES = {"long", "byte", "short", "integer"};
    private static final String[] FLOAT_TYPES = {"double", "float"};
    private static final String[] STR_TYPES = {"string", "simple-string"};
    private static final String[] BYTES_TYPES = {"bytes"};
    private static final String[] NONE_TYPES = {
        "bytes", "boolean", "byte", "short", "integer", "long", "float", "double", "string",
        "simple-string", "bytes",
    };

    /** message_facts of a body of type {@code urt} (45 or 30): {address (a String, or the
     *  UTF8String Spark holds), timestamp (Long), priority (Integer), body size (Long),
     *  origin (the text of _AMQ_ORIG_ADDRESS, or null), expiry move (Boolean: an origin and
     *  _AMQ_ACTUAL_EXPIRY)}. Throws BadRecord for a body Python refuses. */
    static Object[] summary(byte[] d, int urt) {
        Object[] fast = fastSummary(d, urt);
        if (fast == null) return fullSummary(d, urt);
        return new Object[] {fast[0], fast[1], fast[2], fast[3], null, Boolean.FALSE};
    }

    /** Artemis's properties a delivery-policy move adds (message_records.ORIG_ADDRESS,
     *  ACTUAL_EXPIRY), as UTF-8. */
    private static final byte[] ORIG_ADDRESS = utf8("_AMQ_ORIG_ADDRESS"),
        ACTUAL_EXPIRY = utf8("_AMQ_ACTUAL_EXPIRY");

    private static byte[] utf8(String s) {
        return s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** True when the n bytes of d before {@code end} are {@code name}. */
    private static boolean named(byte[] d, int end, long n, byte[] name) {
        return n == name.length && java.util.Arrays.equals(d, end - name.length, end, name, 0,
                                                           name.length);
    }

    /** _fast_summary: a version-1 record without properties whose fields are valid; null for
     *  any other (the full decode then decides). */
    static Object[] fastSummary(byte[] d, int urt) {
        return fastSummary(d, 0, d.length, urt);
    }

    /** {@link #fastSummary(byte[], int)} of the body d[o, o+len), read in place. */
    static Object[] fastSummary(byte[] d, int o, int len, int urt) {
        int n = o + len;  // the body's end in d
        if (len < HEAD) return null;
        long length = Bytes.u32be(d, o + 1);
        long start = o + HEAD + length;
        if (start + FIXED > n) return null;
        int s = (int) start;
        int priority = d[s] & 0xff, durable = d[s + 1] & 0xff;
        long timestamp = Bytes.i64be(d, s + 2), expiration = Bytes.i64be(d, s + 10);
        long scheduled = Bytes.i64be(d, s + 18);
        int count = Bytes.i32be(d, s + 26);
        int end = s + FIXED;
        if (!(d[o] == 1 && length != 0 && count == 0 && priority <= 9 && durable <= 1
              && timestamp >= 0 && expiration >= 0 && scheduled >= 0)) return null;
        long size;
        if (urt == INLINE) {
            if (end + 4 > n) return null;
            size = Bytes.u32be(d, end);
            if (end + 4 + size != n) return null;
        } else if (urt == LARGE) {
            if (end + 8 > n) return null;
            size = Bytes.i64be(d, end);
            if (end + 8 != n || size < 0) return null;
        } else {
            return null;
        }
        Object address = Bytes.sparkUtf8(d, o + HEAD, (int) length);  // what Decode would make of it
        if (address == null) return null;
        return new Object[] {address, timestamp, priority, size};
    }

    /** read_message / decode_large_message, then Message's checks. */
    static Object[] fullSummary(byte[] d, int urt) {
        BadRecord.check(urt == INLINE || urt == LARGE);
        BodyReader r = new BodyReader(d, 1, 2);
        String address = r.text();
        int priority = r.u8(), durable = r.u8();
        BadRecord.check(priority <= 9 && durable <= 1);
        long timestamp = r.i64(), expiration = r.i64(), scheduled = r.i64();
        boolean artemis = r.version == 2;
        int messageType = 0;
        String userId = null;
        if (artemis) {
            messageType = r.u8();
            BadRecord.check(messageType == 0 || messageType >= 2 && messageType <= 6);
            userId = r.optionalText();
        }
        int count = r.i32();
        BadRecord.check(count >= 0);
        // Only version 2 needs the values by name (check_property_types judges the type read
        // for a name against the value read last for it); version 1 only needs the names.
        Map<String, Object> properties = artemis ? new HashMap<>() : null;
        Map<String, String> types = artemis ? new HashMap<>() : null;
        boolean emptyName = false;
        // version 1: the last value of each of the two move properties (a dict keeps the last)
        boolean hasExpiry = false;
        String origin = null;
        for (int i = 0; i < count; i++) {
            if (!artemis) {  // names and values checked, not kept (but the move's two)
                long n = r.skipText();
                emptyName |= n == 0;
                boolean isOrigin = named(d, r.pos, n, ORIG_ADDRESS);
                hasExpiry |= named(d, r.pos, n, ACTUAL_EXPIRY);
                int tag = r.u8();
                if (tag == 5 && isOrigin) origin = r.text();
                else if (tag == 5) r.skipText();
                else readProperty(r, tag);
                if (isOrigin && tag != 5) origin = null;
                continue;
            }
            String name = r.text();
            emptyName |= name.isEmpty();
            int tag = r.u8();
            if (tag >= 7 && tag <= 12) readTyped(r, name, tag, properties, types);
            else properties.put(name, readProperty(r, tag));
        }
        long size = urt == INLINE ? r.raw() : r.i64();
        r.done();
        BadRecord.check(size >= 0);
        // Message.__post_init__
        BadRecord.check(!address.isEmpty());
        BadRecord.check(timestamp >= 0 && expiration >= 0 && scheduled >= 0);
        BadRecord.check(!emptyName);  // check_properties
        if (artemis && (!types.isEmpty() || userId != null || messageType != 0)) {
            checkTypes(properties, types);
        }
        if (artemis) {
            Object o = properties.get("_AMQ_ORIG_ADDRESS");
            origin = o instanceof String ? (String) o : null;
            hasExpiry = properties.containsKey("_AMQ_ACTUAL_EXPIRY");
        }
        boolean expiryMove = origin != null && hasExpiry;
        return new Object[] {address, timestamp, priority, size, origin, expiryMove};
    }

    /** _read_property: tags 0..6. */
    private static Object readProperty(BodyReader r, int tag) {
        switch (tag) {
            case 0: return NONE;
            case 1: return Boolean.FALSE;
            case 2: return Boolean.TRUE;
            case 3: return r.i64();
            case 4: return r.f64();
            case 5: return r.text();
            case 6: r.raw(); return BYTES;
            default: throw BadRecord.INSTANCE;
        }
    }

    /** _read_typed_property: tags 7..12 of version 2, value and Java type. */
    private static void readTyped(BodyReader r, String name, int tag, Map<String, Object> properties,
                                  Map<String, String> types) {
        Object value;
        String kind;
        switch (tag) {
            case 7: value = (long) r.i8(); kind = "byte"; break;
            case 8: value = (long) r.i16(); kind = "short"; break;
            case 9: value = (long) r.i32(); kind = "integer"; break;
            case 10: value = r.f32(); kind = "float"; break;
            case 11: value = r.text(); kind = "simple-string"; break;
            default:
                int index = r.u8();
                BadRecord.check(index < PROPERTY_TYPES.length);
                value = NONE;
                kind = PROPERTY_TYPES[index];
        }
        properties.put(name, value);
        types.put(name, kind);
    }

    private static String[] allowed(Object value) {
        if (value instanceof Boolean) return BOOL_TYPES;
        if (value instanceof Long) return INT_TYPES;
        if (value instanceof Double) return FLOAT_TYPES;
        if (value instanceof String) return STR_TYPES;
        if (value == BYTES) return BYTES_TYPES;
        return NONE_TYPES;
    }

    /** values.check_property_types (a later property of the same name may have replaced the
     *  value a type was read with). */
    private static void checkTypes(Map<String, Object> properties, Map<String, String> types) {
        for (Map.Entry<String, String> e : types.entrySet()) {
            Object value = properties.get(e.getKey());
            String kind = e.getValue();
            String[] allowed = allowed(value);
            boolean ok = false;
            for (String a : allowed) ok |= a.equals(kind);
            BadRecord.check(ok);
            if (kind.equals(allowed[0])) continue;
            if (value instanceof Long) {
                int bits = kind.equals("byte") ? 8 : kind.equals("short") ? 16 : 32;
                long v = (Long) value;
                BadRecord.check(v >= -(1L << (bits - 1)) && v < 1L << (bits - 1));
            } else if (value instanceof Double) {
                BadRecord.check(isFloat32((Double) value));
            }
        }
    }

    /** values._is_float32: NaN, or a value a 32-bit float holds exactly (a finite value that
     *  rounds to infinity, an overflow in Python's struct.pack, compares unequal here). */
    static boolean isFloat32(double v) {
        return Double.isNaN(v) || (double) (float) v == v;
    }
}
