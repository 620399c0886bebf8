package io.github.fencing;

import java.sql.Connection;
import java.sql.SQLException;

/** The caller's statements for {@link Fencing#fenced}: runs on the connection, in its transaction. */
@FunctionalInterface
public interface SqlFunction<T> {
    T apply(Connection connection) throws SQLException;
}
