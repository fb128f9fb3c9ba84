package store.reporting.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry;
import org.apache.spark.sql.catalyst.expressions.Coalesce;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.internal.SessionState;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/** Registers the decoder's SQL functions on a session, as temporary functions (as a UDF is):
 *  {@code table(journal string, recordtype int, userrecordtype int, record binary)} calling
 *  {@link Decode#record}, and {@code file(journal string, path string, content binary)}
 *  calling {@link Decode#file} or, without {@code content}, {@code file(journal, path)} calling
 *  {@link Decode#read} (the JVM reads the file itself), each under the name and result type
 *  (Spark's JSON form) the Python side gives, so store.reporting.schemas stays the one place
 *  the columns are named.
 *
 *  <p>Why not Java UDFs: a UDF's {@code Row} result is converted field by field into Spark's
 *  internal row, and its arguments from it, which cost about as much as the decode itself.
 *  Each call here is Spark's own {@code StaticInvoke} expression: whole-stage code generation
 *  calls the static method with the arguments' values (Spark casts them to the declared
 *  types), and its result is already an internal row. StaticInvoke is an internal Spark API:
 *  the jar is compiled against the Spark in use (store.reporting.jvm rebuilds it when Spark
 *  changes). */
public final class Functions {
    private Functions() {}

    /** What the registry records as the functions' origin (Spark's own UDFs say scala_udf). */
    private static final String SOURCE = "scala_udf";
    /** What a null record type is passed as: Spark would make the whole result null for a null
     *  int argument, where Python decodes a null type to nothing; no record type is -1. */
    static final int NULL_INT = -1;

    /** Registers both functions on {@code session} (a classic SparkSession, as PySpark's
     *  {@code _jsparkSession} is). Throws what reflection throws when it is not one. */
    public static void register(Object session, String tableName, String tableType,
                                String fileName, String fileType) throws ReflectiveOperationException {
        SessionState state = (SessionState) session.getClass().getMethod("sessionState").invoke(session);
        FunctionRegistry registry = state.functionRegistry();
        registry.createOrReplaceTempFunction(tableName, new Builder(tableName,
            DataType.fromJson(tableType), Map.of(4, new Call("record", List.of(DataTypes.StringType,
            DataTypes.IntegerType, DataTypes.IntegerType, DataTypes.BinaryType)))), SOURCE);
        registry.createOrReplaceTempFunction(fileName, new Builder(fileName,
            DataType.fromJson(fileType), Map.of(
                2, new Call("read", List.of(DataTypes.StringType, DataTypes.StringType)),
                3, new Call("file", List.of(DataTypes.StringType, DataTypes.StringType,
                                            DataTypes.BinaryType)))), SOURCE);
    }

    private static <T> Seq<T> seq(List<T> items) {
        return CollectionConverters.asScala(items).toSeq();
    }

    /** A static method of {@link Decode} and the types of its arguments. */
    private record Call(String method, List<AbstractDataType> inputs) {}

    /** Spark's function builder: a StaticInvoke of the {@link Decode} method taking as many
     *  arguments as are given. */
    private static final class Builder extends AbstractFunction1<Seq<Expression>, Expression> {
        private final String name;
        private final DataType type;
        private final Map<Integer, Call> calls;

        Builder(String name, DataType type, Map<Integer, Call> calls) {
            this.name = name;
            this.type = type;
            this.calls = calls;
        }

        @Override
        public Expression apply(Seq<Expression> given) {
            Call call = calls.get(given.size());
            if (call == null) {
                throw new IllegalArgumentException(name + " takes "
                    + new TreeSet<>(calls.keySet()) + " arguments, not " + given.size());
            }
            List<Expression> arguments = new ArrayList<>(CollectionConverters.asJava(given));
            for (int i = 0; i < arguments.size(); i++) {
                if (call.inputs().get(i) == DataTypes.IntegerType) {  // a primitive: null would be the result's
                    arguments.set(i, new Coalesce(seq(List.of(arguments.get(i), Literal.create(NULL_INT, DataTypes.IntegerType)))));
                }
            }
            return new StaticInvoke(Decode.class, type, call.method(), seq(arguments),
                seq(call.inputs()), false, false, true, Option.empty());
        }
    }
}
