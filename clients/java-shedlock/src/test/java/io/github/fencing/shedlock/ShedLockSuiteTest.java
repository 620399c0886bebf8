package io.github.fencing.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.sql.SQLException;

import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import org.junit.jupiter.api.AfterEach;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;

/**
 * ShedLock's own provider test suite (shedlock-test-support 6.6.1, the only version Maven Central
 * serves; it calls only API of shedlock-core 5.16.0): locks, refusals, lockAtLeastFor, timeouts,
 * extensions and its multi-threaded fuzz test, on the lease of each lock name.
 */
class ShedLockSuiteTest extends AbstractExtensibleLockProviderIntegrationTest {
    private final FencingLockProvider provider = new FencingLockProvider(Db.source(), "shedlock-suite:", "suite");

    /** The suite leaves locks it never unlocks: they would stay this thread's current lock. */
    @AfterEach
    void forgetUnlockedLocks() {
        FencingLockContext.clear();
    }

    @Override
    protected ExtensibleLockProvider getLockProvider() {
        return provider;
    }

    @Override
    protected void assertUnlocked(String name) {
        try {
            assertNull(Db.liveHolder(provider.resource(name)), name + " is unlocked");
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    protected void assertLocked(String name) {
        try {
            assertEquals(provider.holder(), Db.liveHolder(provider.resource(name)), name + " is locked");
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }
}
