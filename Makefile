# fencing: a PGXS build of a C++17 extension.

EXTENSION = fencing
EXTVERSION = 0.2.0
MODULE_big = fencing
OBJS = \
	src/settings.o \
	src/merge.o \
	src/token.o \
	src/errors.o \
	src/table.o \
	src/keys.o \
	src/marks.o \
	src/protect.o \
	src/guard.o \
	src/plan_cache.o \
	src/fenced_update.o \
	src/spi.o \
	src/arguments.o \
	src/tokens.o \
	src/resources.o \
	src/leases.o \
	src/fence.o \
	src/upgrade.o

# One full script per release, plus an upgrade script from every earlier one.
DATA = sql/fencing--$(EXTVERSION).sql sql/fencing--0.1.0--0.2.0.sql

# pg_regress tests: sql/NAME.sql against expected/NAME.out
REGRESS = setup token_scope split_brain guard modes inputs marks lending truncate fenced_update leases fence \
	partitioned security plan_cache nested
REGRESS_OPTS = --inputdir=. --load-extension=fencing

# isolation tests: test/isolation/specs/NAME.spec
ISOLATION = stale_after_commit lower_waits_for_higher rollback_lets_lower \
	repeatable_read update_vs_delete concurrent_insert three_writers \
	acquire_race acquire_expiry fence_order
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=fencing

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
includedir_server := $(shell $(PG_CONFIG) --includedir-server)

# PostgreSQL headers are system headers to us; our own code is held to -Wall -Wextra.
PG_CPPFLAGS = -isystem $(includedir_server)
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-register
ifeq ($(WERROR),1)
PG_CXXFLAGS += -Werror
endif
SHLIB_LINK = -lstdc++

# The LLVM bitcode step would compile the C++ without PG_CXXFLAGS; JIT inlining
# of this module is not worth a clang dependency.
override with_llvm = no

include $(PGXS)

# Side-by-side benchmarks on a throwaway cluster (see test/bench/run --help).
.PHONY: bench
bench:
	test/bench/run $(BENCH_OPTS)
