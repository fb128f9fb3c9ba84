package store.reporting.jvm;

/** store.messaging.codec.Reader: one record body read field by field, big-endian; every read
 *  past the end, negative length, bad version or non-UTF-8 text throws {@link BadRecord}. */
final class BodyReader {
    final byte[] d;
    final int version;
    int pos;

    /** Checks the body is not empty and its version byte is one of {@code versions}. */
    BodyReader(byte[] body, int... versions) {
        d = body;
        BadRecord.check(body.length > 0);
        int v = u8();
        boolean known = false;
        for (int x : versions) known |= x == v;
        BadRecord.check(known);
        version = v;
    }

    /** The offset of {@code n} bytes taken from here. */
    int take(long n) {
        BadRecord.check(n >= 0 && pos + n <= d.length);
        int at = pos;
        pos += (int) n;
        return at;
    }

    int u8() {
        return d[take(1)] & 0xff;
    }

    int i8() {
        return d[take(1)];
    }

    int i16() {
        int p = take(2);
        return (short) ((d[p] & 0xff) << 8 | (d[p + 1] & 0xff));
    }

    int i32() {
        return Bytes.i32be(d, take(4));
    }

    long i64() {
        return Bytes.i64be(d, take(8));
    }

    double f32() {
        return Float.intBitsToFloat(i32());
    }

    double f64() {
        return Double.longBitsToDouble(i64());
    }

    /** u32 length + bytes: the length (the bytes are skipped). */
    long raw() {
        long n = Bytes.u32be(d, take(4));
        take(n);
        return n;
    }

    private String decode(int at, int n) {
        String s = Bytes.utf8(d, at, n);
        BadRecord.check(s != null);
        return s;
    }

    /** u32 length + strict UTF-8. */
    String text() {
        long n = Bytes.u32be(d, take(4));
        return decode(take(n), (int) n);
    }

    /** text() without the String: checks the UTF-8 and returns the byte length. */
    long skipText() {
        long n = Bytes.u32be(d, take(4));
        BadRecord.check(Bytes.validUtf8(d, take(n), (int) n));
        return n;
    }

    /** i32 length (-1: null) + strict UTF-8. */
    String optionalText() {
        int n = i32();
        if (n == -1) return null;
        BadRecord.check(n >= 0);
        return decode(take(n), n);
    }

    /** Reader.done: nothing may follow. */
    void done() {
        BadRecord.check(pos == d.length);
    }
}
