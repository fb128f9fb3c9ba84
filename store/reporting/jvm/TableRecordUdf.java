package store.reporting.jvm;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF5;

/** (journal, recordtype, userrecordtype, id, record) -> the struct of the 11 decoded columns
 *  (address string, name string, queue_id long, timestamp long, priority int, body_size long,
 *  large boolean, error string, page long, page_index int, page_tx_id long): what
 *  store.reporting.decode.decode_body gives, absent keys null; a body that does not decode
 *  gives only {@code error}, the sentinel of {@link RecordDecoder}. Never returns null. */
public class TableRecordUdf implements UDF5<String, Number, Number, Number, byte[], Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public Row call(String journal, Number kind, Number urt, Number id, byte[] record) {
        return RowFactory.create(RecordDecoder.decode(journal, kind, urt, record));
    }
}
