package io.github.fencing;

import java.sql.SQLException;

/**
 * The caller's code for {@link Fencing#withLease}: runs while the lease is held, with the lease
 * (its token for fenced writes, its loss signal {@link Lease#lost()}).
 */
@FunctionalInterface
public interface LeaseFunction<T> {
    T apply(Lease lease) throws SQLException;
}
