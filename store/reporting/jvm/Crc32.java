package store.reporting.jvm;

import java.util.zip.CRC32;

/** CRC-32 (zlib's, java.util.zip.CRC32) of two slices of a byte array, one after the other
 *  (a record's body, then its header): both copied into one buffer and summed by a single
 *  call of the JDK's intrinsic. Why: a call costs about as much for a short slice as for a
 *  long one (short buffers take a slow path), so two calls per record made the CRC most of a
 *  file decode's time. Not thread-safe (one per scan). */
final class Crc32 {
    private final CRC32 crc = new CRC32();
    private byte[] buffer = new byte[4096];

    /** The CRC of d[a, a+alen) followed by d[b, b+blen). */
    int of(byte[] d, int a, int alen, int b, int blen) {
        int n = alen + blen;
        if (buffer.length < n) buffer = new byte[Math.max(n, 2 * buffer.length)];
        System.arraycopy(d, a, buffer, 0, alen);
        System.arraycopy(d, b, buffer, alen, blen);
        crc.reset();
        crc.update(buffer, 0, n);
        return (int) crc.getValue();
    }
}
