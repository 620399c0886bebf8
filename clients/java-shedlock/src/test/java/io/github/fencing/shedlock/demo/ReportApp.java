package io.github.fencing.shedlock.demo;

import io.github.fencing.ConnectionSource;
import io.github.fencing.shedlock.FencingLockProvider;

import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.scheduling.annotation.EnableScheduling;

/**
 * A Spring Boot application with one {@code @Scheduled} + {@code @SchedulerLock} task
 * ({@link ReportJob}), as users write it: TwoInstancesTest runs two of them against one server.
 */
@SpringBootApplication
@EnableScheduling
@EnableSchedulerLock(defaultLockAtMostFor = "PT5S")
public class ReportApp {
    /** The server of libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE). */
    @Bean
    ConnectionSource database() {
        return ConnectionSource.fromEnvironment();
    }

    /** ShedLock's locks are fencing leases: {@code shedlock:<name>}. */
    @Bean
    LockProvider lockProvider(ConnectionSource database) {
        return new FencingLockProvider(database);
    }

    public static void main(String[] args) {
        SpringApplication.run(ReportApp.class, args);
    }
}
