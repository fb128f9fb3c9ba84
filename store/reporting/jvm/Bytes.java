package store.reporting.jvm;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.apache.spark.unsafe.types.UTF8String;

/** Fixed-width reads of a byte array (big-endian for record bodies, little-endian for the
 *  journal file framing) and strict UTF-8 decoding, as Python's {@code bytes.decode("utf-8")}
 *  accepts it (well-formed sequences only: no overlongs, surrogates or code points past
 *  U+10FFFF). Pure static functions. */
final class Bytes {
    private Bytes() {}

    // Views of a byte array as ints and longs at any offset (one bounds check, one load).
    private static final VarHandle I32LE = view(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle I64LE = view(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle I32BE = view(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I64BE = view(long[].class, ByteOrder.BIG_ENDIAN);

    private static VarHandle view(Class<?> type, ByteOrder order) {
        return MethodHandles.byteArrayViewVarHandle(type, order);
    }

    static int u16le(byte[] d, int p) {
        return (d[p] & 0xff) | (d[p + 1] & 0xff) << 8;
    }

    static int i32le(byte[] d, int p) {
        return (int) I32LE.get(d, p);
    }

    static long u32le(byte[] d, int p) {
        return i32le(d, p) & 0xffffffffL;
    }

    static long i64le(byte[] d, int p) {
        return (long) I64LE.get(d, p);
    }

    static int i32be(byte[] d, int p) {
        return (int) I32BE.get(d, p);
    }

    static long u32be(byte[] d, int p) {
        return i32be(d, p) & 0xffffffffL;
    }

    static long i64be(byte[] d, int p) {
        return (long) I64BE.get(d, p);
    }

    /** True when d[off, off+len) is well-formed UTF-8 (Unicode table 3-7, what CPython's
     *  strict decoder accepts). */
    static boolean validUtf8(byte[] d, int off, int len) {
        int i = off, end = off + len;
        while (i < end) {
            int b = d[i] & 0xff;
            if (b < 0x80) { i++; continue; }
            int n, lo = 0x80, hi = 0xbf;
            if (b >= 0xc2 && b <= 0xdf) n = 1;
            else if (b == 0xe0) { n = 2; lo = 0xa0; }
            else if (b >= 0xe1 && b <= 0xec || b == 0xee || b == 0xef) n = 2;
            else if (b == 0xed) { n = 2; hi = 0x9f; }
            else if (b == 0xf0) { n = 3; lo = 0x90; }
            else if (b >= 0xf1 && b <= 0xf3) n = 3;
            else if (b == 0xf4) { n = 3; hi = 0x8f; }
            else return false;
            if (i + n >= end) return false;  // the sequence is cut off
            int c = d[i + 1] & 0xff;
            if (c < lo || c > hi) return false;
            for (int k = 2; k <= n; k++) {
                c = d[i + k] & 0xff;
                if (c < 0x80 || c > 0xbf) return false;
            }
            i += n + 1;
        }
        return true;
    }

    /** The text of d[off, off+len) as Spark holds a string (its bytes copied, not decoded), or
     *  null when it is not strict UTF-8. */
    static UTF8String sparkUtf8(byte[] d, int off, int len) {
        if (!validUtf8(d, off, len)) return null;
        return UTF8String.fromBytes(d, off, len);
    }

    /** The text of d[off, off+len), or null when it is not strict UTF-8. */
    static String utf8(byte[] d, int off, int len) {
        if (!validUtf8(d, off, len)) return null;
        return new String(d, off, len, StandardCharsets.UTF_8);
    }
}
