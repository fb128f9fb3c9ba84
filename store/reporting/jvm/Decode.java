package store.reporting.jvm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.unsafe.types.UTF8String;

/** What the decoder's SQL functions call ({@link Functions}: Spark's generated code calls these
 *  with the arguments' values as Spark holds them): results are Spark's internal rows, built
 *  directly (strings as {@link UTF8String}), so nothing converts them afterwards. A null
 *  record type arrives as {@link Functions#NULL_INT} (no record type has it), which decodes
 *  to nothing, as a null does in Python. Pure static functions. */
public final class Decode {
    private Decode() {}

    private static final UTF8String BINDINGS = UTF8String.fromString("bindings");

    /** {@code store_decode_record}: the struct of the 13 columns of {@link RecordDecoder}.
     *  Never null. */
    public static InternalRow record(UTF8String journal, int kind, int urt, byte[] record) {
        String name = BINDINGS.equals(journal) ? "bindings" : "messages";
        return internal(RecordDecoder.decode(name, kind, urt, record));
    }

    /** {@code store_decode_file}: the records of one journal file, the rows of
     *  {@link FileRecords}. Never null; throws IllegalStateException naming the path for a
     *  damaged header. */
    public static ArrayData file(UTF8String journal, UTF8String path, byte[] content) {
        String name = BINDINGS.equals(journal) ? "bindings" : "messages";
        return new Rows(new FileRecords(name, String.valueOf(path), content));
    }

    /** {@code store_decode_file} without content: the records of the journal file at
     *  {@code path} (a {@code file:} URI, as Spark's binaryFile source names it, or a local
     *  path), read here in one piece: Spark's binaryFile would copy its bytes into a row
     *  buffer and again into this call's argument, three arrays of a file's size where this
     *  is one. Never null; throws IllegalStateException naming the path for a damaged header
     *  and UncheckedIOException naming it when the file cannot be read. */
    public static ArrayData read(UTF8String journal, UTF8String path) {
        String name = String.valueOf(path);
        byte[] content;
        try {
            content = Files.readAllBytes(Path.of(local(name)));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read journal file " + name + ": " + e, e);
        }
        return file(journal, path, content);
    }

    /** The local path a {@code file:} URI as Hadoop prints it names ({@code file:/a b/x},
     *  {@code file:///a/x}: not escaped, so not parsed as a URI); any other text as it is. */
    static String local(String path) {
        if (path.startsWith("file://")) return path.substring("file://".length());
        if (path.startsWith("file:")) return path.substring("file:".length());
        return path;
    }

    /** A file's rows as Spark's array, each decoded when Spark reads it (explode reads them
     *  one after the other): a file's 50,000-odd rows are never all alive at once, which kept
     *  the JVM's collector busy copying them. Built on GenericArrayData (its placeholder array
     *  of nulls gives the length) so only what an array of structs is read by is overridden;
     *  whatever reads the whole array gets the decoded rows, never the placeholder: copy()
     *  and array() here, and GenericArrayData's equals, hashCode and toString, which read
     *  it through array(). */
    private static final class Rows extends GenericArrayData {
        private static final long serialVersionUID = 1L;
        private final FileRecords records;

        Rows(FileRecords records) {
            super(new Object[records.size()]);
            this.records = records;
        }

        @Override
        public int numElements() {  // GenericArrayData's would build array()
            return records.size();
        }

        @Override
        public boolean isNullAt(int i) {
            return false;
        }

        @Override
        public InternalRow getStruct(int i, int fields) {
            return internal(records.row(i));
        }

        @Override
        public Object get(int i, DataType type) {
            return getStruct(i, 0);
        }

        @Override
        public Object[] array() {
            Object[] out = new Object[records.size()];
            for (int i = 0; i < out.length; i++) out[i] = getStruct(i, 0);
            return out;
        }

        @Override
        public ArrayData copy() {
            return new GenericArrayData(array());
        }
    }

    /** Spark's internal row of {@code values}: a {@link String} becomes a {@link UTF8String};
     *  longs, ints, booleans and nulls are already what Spark holds. */
    private static InternalRow internal(Object[] values) {
        for (int i = 0; i < values.length; i++) {
            if (values[i] instanceof String s) values[i] = UTF8String.fromString(s);
        }
        return new GenericInternalRow(values);
    }
}
