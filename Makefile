# fencing: a PGXS build of a C++17 extension.

EXTENSION = fencing
EXTVERSION = 0.4.0
MODULE_big = fencing
# Every source of src/, one folder per layer (src/LAYERS; test/lint/includes
# checks that includes run down the layers only).
SOURCES = $(sort $(wildcard src/*/*.cpp))
OBJS = $(SOURCES:.cpp=.o)

# Every released version's full script (CREATE EXTENSION fencing VERSION '0.1.0'
# works with the current library, which serves every release's objects until
# ALTER EXTENSION fencing UPDATE), and an upgrade script from each to the next.
# The SQL is written once (docs/testing.md, "Where the SQL lives"): the
# release's install script is built from SQL_SOURCES, in this order (tables
# before what reads them, views after the functions, event triggers last);
# each upgrade script in UPGRADES from its hand-written part
# sql/upgrade/A--B.sql, whose lines "--@include sql/src/FILE" bring in the
# definitions.  Built scripts of the release in the making are not
# committed; those of released versions are, frozen as they shipped
# (a release's scripts never change once it is out).
SQL_SOURCES = $(addprefix sql/src/,prologue.sql internal.sql tables.sql registry.sql table_options.sql \
	guard.sql protect.sql citus.sql ddl.sql leases.sql stats.sql rollout.sql compact.sql \
	views.sql election.sql monitor.sql event_triggers.sql)
UPGRADES = 0.3.0--0.4.0
DATA = sql/fencing--0.3.0.sql sql/fencing--0.2.0--0.3.0.sql \
	sql/fencing--0.2.0.sql sql/fencing--0.1.0.sql sql/fencing--0.1.0--0.2.0.sql
DATA_built = sql/fencing--$(EXTVERSION).sql $(UPGRADES:%=sql/fencing--%.sql)

# pg_regress tests: test/schedule lists them (sql/NAME.sql against
# expected/NAME.out, in order) with the servers each runs on: REGRESS those
# of a server that preloads the module, REGRESS_UNLOADED those of one that
# does not.  test/lint/schedule checks the list against sql/.
schedule_of = $(shell awk 'NF > 1 && $$1 ~ /^[a-z]/ { for (i = 2; i <= NF; i++) if ($$i == "$(1)") print $$1 }' test/schedule)
REGRESS = $(call schedule_of,preloaded)
REGRESS_UNLOADED = $(call schedule_of,unloaded)
REGRESS_OPTS = --inputdir=. --load-extension=fencing

# isolation tests: test/isolation/specs/NAME.spec, all of them; those that
# also run on a server that does not preload the module (acquire() with wait
# polls there: the same timeouts and errors, no queue)
ISOLATION = $(basename $(notdir $(sort $(wildcard test/isolation/specs/*.spec))))
ISOLATION_UNLOADED = lease_wait_timeouts
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=fencing

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
includedir_server := $(shell $(PG_CONFIG) --includedir-server)

# PostgreSQL headers are system headers to us; our own code is held to -Wall -Wextra.
PG_CPPFLAGS = -I$(srcdir)/src -isystem $(includedir_server) -DFENCING_VERSION=\"$(EXTVERSION)\"
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-register -MMD -MP
ifeq ($(WERROR),1)
PG_CXXFLAGS += -Werror
endif
SHLIB_LINK = -lstdc++

# The LLVM bitcode step would compile the C++ without PG_CXXFLAGS; JIT inlining
# of this module is not worth a clang dependency.
override with_llvm = no

# The contributor's loop (CONTRIBUTING.md), without root and without touching
# the system's PostgreSQL: test/dev builds, installs into a private copy of
# the PostgreSQL of PG_CONFIG (tmp_check/, made once by test/tmp_install) and
# runs the tests on a throwaway cluster of that copy.
#   make check               the regression and isolation tests on a cluster
#                            that preloads the module, then the "unloaded"
#                            ones (test/schedule) on one that does not
#   make check TEST=NAME     one test: sql/NAME.sql (after setup, on the
#                            servers test/schedule gives it) or
#                            test/isolation/specs/NAME.spec
#   make check-tap [TEST=t/NNN_name.pl]   the TAP tests (test/t), or one
# Give these goals alone: they run make again inside test/dev, and PGXS'
# own "check" (not supported for extensions) is not read for them.
CHECK_GOALS = check check-tap
ifneq ($(filter $(CHECK_GOALS),$(MAKECMDGOALS)),)
DEV = MAKEFLAGS= MAKEOVERRIDES= $(if $(filter command line environment,$(origin PG_CONFIG)),PG_CONFIG=$(PG_CONFIG)) test/dev
CHECK_SETUP = $(if $(filter setup,$(TEST)),setup,setup $(TEST))
.PHONY: check check-tap
check:
	@test/lint/schedule >/dev/null || test/lint/schedule
ifeq ($(TEST),)
	$(DEV) $(MAKE) -s installcheck
	$(DEV) --no-preload $(MAKE) -s installcheck REGRESS="$(REGRESS_UNLOADED)" ISOLATION="$(ISOLATION_UNLOADED)"
else ifneq ($(wildcard sql/$(TEST).sql),)
ifneq ($(filter $(TEST),$(REGRESS)),)
	$(DEV) $(MAKE) -s installcheck REGRESS="$(CHECK_SETUP)" ISOLATION=
endif
ifneq ($(filter $(TEST),$(REGRESS_UNLOADED)),)
	$(DEV) --no-preload $(MAKE) -s installcheck REGRESS="$(CHECK_SETUP)" ISOLATION=
endif
else ifneq ($(wildcard test/isolation/specs/$(TEST).spec),)
	$(DEV) $(MAKE) -s installcheck REGRESS= ISOLATION=$(TEST)
else
	@echo "make check: no test $(TEST) (sql/$(TEST).sql or test/isolation/specs/$(TEST).spec)" >&2; exit 1
endif
check-tap:
	$(DEV) $(MAKE) -s prove_installcheck $(if $(TEST),PROVE_TESTS="$(patsubst test/%,%,$(TEST))")
else
include $(PGXS)
endif

# The SQL scripts: files concatenated (a blank line between two), each line
# "--@include FILE" replaced by FILE.  `make clean` removes them (DATA_built).
SQL_ASSEMBLE = awk 'FNR == 1 && NR > 1 { print "" } \
	$$1 == "--@include" { while ((r = (getline line <$$2)) > 0) print line; \
		if (r < 0) { print "cannot read " $$2 >"/dev/stderr"; exit 1 } close($$2); next } \
	{ print }'
sql/fencing--$(EXTVERSION).sql: $(SQL_SOURCES)
	$(SQL_ASSEMBLE) $^ >$@ || { rm -f $@; exit 1; }
$(UPGRADES:%=sql/fencing--%.sql): sql/fencing--%.sql: sql/upgrade/%.sql $(SQL_SOURCES)
	$(SQL_ASSEMBLE) $< >$@ || { rm -f $@; exit 1; }

# Header dependencies, written by the compiler (-MMD -MP) beside each object.
EXTRA_CLEAN = $(OBJS:.o=.d)
-include $(OBJS:.o=.d)

# Side-by-side benchmarks on a throwaway cluster (see test/bench/run --help).
.PHONY: bench
bench:
	test/bench/run $(BENCH_OPTS)

# TAP tests (test/t/*.pl) against the server binaries of $(PG_CONFIG): each
# test starts its own clusters.  initdb refuses root, so as root they run as
# the postgres user.
PGBIN := $(shell $(PG_CONFIG) --bindir)
pgxs_dir := $(dir $(PGXS))../..
TAP_ENV = PATH="$(PGBIN):$$PATH" PG_REGRESS=$(pgxs_dir)/src/test/regress/pg_regress
.PHONY: prove_installcheck
# PROVE_TESTS="t/006_two_primaries.pl ...": some of them only.
prove_installcheck:
	@if [ "$$(id -u)" = 0 ]; then \
		tmp=$$(mktemp -d) && cp -r test/t "$$tmp/" && chown -R postgres: "$$tmp" && \
		cd "$$tmp" && runuser -u postgres -- env $(TAP_ENV) \
			prove -I $(pgxs_dir)/src/test/perl -I t $(PROVE_FLAGS) $(or $(PROVE_TESTS),t/*.pl); \
		status=$$?; \
		[ $$status -eq 0 ] || tail -n 40 tmp_check/log/regress_log_* 2>/dev/null; \
		rm -rf "$$tmp"; exit $$status; \
	else \
		$(TAP_ENV) prove -I $(pgxs_dir)/src/test/perl -I test/t $(PROVE_FLAGS) \
			$(or $(addprefix test/,$(PROVE_TESTS)),test/t/*.pl); \
	fi

# clang-tidy (.clang-tidy: bugprone, clang-analyzer) over the extension's sources.
.PHONY: tidy
tidy:
	clang-tidy --quiet $(OBJS:.o=.cpp) -- -std=c++17 -Wno-register -isystem $(includedir_server) \
		-isystem $(shell $(PG_CONFIG) --includedir-server)/../internal -D_GNU_SOURCE -Isrc

# clang-format (.clang-format) over every C++ file: `make format` applies it,
# `make format-check` (run by test/check) fails on any difference.
FORMAT_FILES = $(wildcard src/*/*.cpp src/*/*.hpp test/*/*.cpp test/*/*.hpp)
.PHONY: format format-check
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

# `make install`, but each file is replaced by a rename (modes kept), the
# library first (it serves every older release's objects; new SQL files
# beside the old library would not work): a session that loads the module
# meanwhile reads the old file or the new one, never a half-copied one
# (docs/operations.md, "Upgrading").
.PHONY: install-online
install-online: all
	rm -rf .stage
	$(MAKE) -s install DESTDIR=$(CURDIR)/.stage >/dev/null
	cd .stage && { find . -type f -name '*.so'; find . -type f ! -name '*.so'; } | while read -r f; do \
		dest=$${f#.}; install -d "$$(dirname "$$dest")"; \
		cp -p "$$f" "$$dest.new" && mv -f "$$dest.new" "$$dest" || { rm -f "$$dest.new"; exit 1; }; \
	done
	rm -rf .stage

# The PGXN distribution: a zip of the committed tree (HEAD) under
# fencing-$(EXTVERSION)/, as PGXN expects it; build products are not committed.
.PHONY: dist
dist:
	git archive --format=zip --prefix=fencing-$(EXTVERSION)/ -o fencing-$(EXTVERSION).zip HEAD
