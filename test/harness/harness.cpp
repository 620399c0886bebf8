// fencing-harness: the GC-pause split brain with real worker processes.
//
// Workers are forked processes holding real leases from a real lock manager
// (PostgreSQL's fencing.acquire/renew/release, or redis-server running the
// seed design's Lua scripts), renewing them from a heartbeat thread at a
// third of the TTL, and writing through fencing.fenced_update() or plain SQL
// with SET LOCAL fencing.token.  The orchestrator freezes workers with
// SIGSTOP (the heartbeat thread freezes with them, so the lease really
// expires) and thaws them with SIGCONT.  The database must reject every
// stale write; a checker proves it from the database alone.
//
//   fencing-harness scripted [--locks pg|redis] [--write fenced|sql] [--scale MS] [--citus]
//   fencing-harness chaos    [--locks pg|redis] [--write fenced|sql] [--workers N]
//                            [--resources M] [--seconds S] [--ttl MS] [--seed N] [--citus]
//
// PostgreSQL is reached through the usual PG* environment variables.
//
// --citus: PG* names a Citus coordinator; harness.accounts is distributed by
// resource before it is protected.  Its triggers run on the shards, on the
// workers, so the audit cannot be a local table filled by an AFTER trigger:
// instead a BEFORE UPDATE trigger named to fire after fencing_guard
// (zz_history) appends each accepted token to the row's `history` column, and
// the checker reads the order of accepted writes from there.  Dead letters,
// events and the Redis reset's marks are local tables on the coordinator.

#include "redis_locks.hpp"

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace
{

using Clock = std::chrono::steady_clock;

struct Options {
	std::string mode;
	std::string locks = "pg";
	std::string write = "fenced";
	int scale_ms = 100;
	int workers = 4;
	int resources = 3;
	int seconds = 60;
	int ttl_ms = 600;
	unsigned seed = 1;
	std::string redis_dir = "/tmp";
	int redis_port = 0;
	bool citus = false;
};

Options options;
Clock::time_point started;

[[noreturn]] void fail(const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	std::fprintf(stderr, "fencing-harness: ");
	std::vfprintf(stderr, format, ap);
	std::fprintf(stderr, "\n");
	va_end(ap);
	std::exit(2);
}

double elapsed_ms()
{
	return std::chrono::duration<double, std::milli>(Clock::now() - started).count();
}

// One timeline line, written with a single write() so lines of concurrent
// processes never interleave.
void event(const char *who, const char *format, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, format);
	std::vsnprintf(text, sizeof text, format, ap);
	va_end(ap);
	char line[640];
	int n = std::snprintf(line, sizeof line, "t=%-5.1f %-8s %s\n", elapsed_ms() / options.scale_ms,
	                      who, text);
	if (write(STDOUT_FILENO, line, static_cast<size_t>(n)) < 0)
		std::exit(2);
}

void sleep_ms(double ms)
{
	if (ms > 0)
		std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

// Sleeps until schedule second `t` (scripted mode).
void until(double t)
{
	sleep_ms(t * options.scale_ms - elapsed_ms());
}

// ---------------------------------------------------------------- PostgreSQL

using Result = std::unique_ptr<PGresult, void (*)(PGresult *)>;

class Db
{
  public:
	Db() : conn_(PQconnectdb(""), PQfinish)
	{
		if (PQstatus(conn_.get()) != CONNECTION_OK)
			fail("PostgreSQL not reachable: %s", first_line(PQerrorMessage(conn_.get())).c_str());
		PQsetNoticeProcessor(
		    conn_.get(), [](void *, const char *) {}, nullptr);
	}
	// Runs a statement; returns the result, whatever its status.
	Result run(const char *sql, std::vector<std::string> params = {})
	{
		std::vector<const char *> values;
		for (auto &p : params)
			values.push_back(p.c_str());
		return Result(PQexecParams(conn_.get(), sql, static_cast<int>(values.size()), nullptr,
		                           values.data(), nullptr, nullptr, 0),
		              PQclear);
	}
	// Runs a statement that must succeed; returns the first value of its first row.
	std::string value(const char *sql, std::vector<std::string> params = {})
	{
		Result r = run(sql, std::move(params));
		auto status = PQresultStatus(r.get());
		if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
			throw std::runtime_error(std::string(sql) + ": " +
			                         first_line(PQresultErrorMessage(r.get())));
		return PQntuples(r.get()) > 0 && !PQgetisnull(r.get(), 0, 0) ? PQgetvalue(r.get(), 0, 0)
		                                                             : "";
	}
	static std::string first_line(const char *text)
	{
		std::string s(text ? text : "");
		return s.substr(0, s.find('\n'));
	}

  private:
	std::unique_ptr<PGconn, void (*)(PGconn *)> conn_;
};

// ------------------------------------------------------------- lock managers

class LockManager
{
  public:
	virtual ~LockManager() = default;
	virtual std::optional<long long> acquire(const std::string &resource, const std::string &holder,
	                                         int ttl_ms) = 0;
	virtual bool renew(const std::string &resource, const std::string &holder, long long token,
	                   int ttl_ms) = 0;
	virtual bool release(const std::string &resource, const std::string &holder,
	                     long long token) = 0;
};

class PgLocks : public LockManager
{
  public:
	std::optional<long long> acquire(const std::string &resource, const std::string &holder,
	                                 int ttl_ms) override
	{
		std::string t =
		    db_.value("SELECT fencing.acquire($1, $2, make_interval(secs => $3 / 1000.0))",
		              {resource, holder, std::to_string(ttl_ms)});
		if (t.empty())
			return std::nullopt;
		return std::stoll(t);
	}
	bool renew(const std::string &resource, const std::string &holder, long long token,
	           int ttl_ms) override
	{
		return db_.value("SELECT fencing.renew($1, $2, $3, make_interval(secs => $4 / 1000.0))",
		                 {resource, holder, std::to_string(token), std::to_string(ttl_ms)}) == "t";
	}
	bool release(const std::string &resource, const std::string &holder, long long token) override
	{
		return db_.value("SELECT fencing.release($1, $2, $3)",
		                 {resource, holder, std::to_string(token)}) == "t";
	}

  private:
	Db db_;
};

class RedisLocks : public LockManager
{
  public:
	RedisLocks() : redis_("127.0.0.1", options.redis_port) {}
	std::optional<long long> acquire(const std::string &resource, const std::string &holder,
	                                 int ttl_ms) override
	{
		long long token = redis_.acquire(resource, holder, ttl_ms);
		return token > 0 ? std::optional<long long>(token) : std::nullopt;
	}
	bool renew(const std::string &resource, const std::string &holder, long long,
	           int ttl_ms) override
	{
		return redis_.renew(resource, holder, ttl_ms);
	}
	bool release(const std::string &resource, const std::string &holder, long long) override
	{
		return redis_.release(resource, holder);
	}
	// SET of a counter: used to seed it and, in chaos mode, to reseed it after a reset.
	void set_counter(const std::string &resource, long long value)
	{
		redis_.command({"SET", "counter:" + resource, std::to_string(value)});
	}

  private:
	redis_locks::Connection redis_;
};

std::unique_ptr<LockManager> lock_manager()
{
	if (options.locks == "redis")
		return std::make_unique<RedisLocks>();
	return std::make_unique<PgLocks>();
}

// -------------------------------------------------------------------- Redis

pid_t redis_pid = 0;

// Starts redis-server on loopback without persistence (a restart resets it).
void start_redis()
{
	if (system("command -v redis-server >/dev/null 2>&1") != 0)
		fail("redis-server is not installed (apt-get install redis-server)");
	redis_pid = fork();
	if (redis_pid == 0) {
		std::string port = std::to_string(options.redis_port);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, STDOUT_FILENO);
		execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
		       "--save", "", "--appendonly", "no", "--dir", options.redis_dir.c_str(), nullptr);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		redisContext *c = redisConnect("127.0.0.1", options.redis_port);
		bool up = c && !c->err;
		if (c)
			redisFree(c);
		if (up)
			return;
		sleep_ms(50);
	}
	fail("redis-server did not start on port %d", options.redis_port);
}

void stop_redis()
{
	if (redis_pid > 0) {
		kill(redis_pid, SIGKILL);
		waitpid(redis_pid, nullptr, 0);
		redis_pid = 0;
	}
}

// ------------------------------------------------------------------ workers

// The lease a worker holds, renewed by its heartbeat thread.
class Lease
{
  public:
	Lease(const std::string &resource, const std::string &holder, long long token, int ttl_ms)
	    : resource_(resource), holder_(holder), token_(token), ttl_ms_(ttl_ms)
	{
		heartbeat_ = std::thread([this] {
			try {
				auto locks = lock_manager(); // its own connection
				// A watchdog on the wall clock: after a pause, the renewal is overdue at once.
				auto next = Clock::now();
				while (!stop_) {
					next += std::chrono::milliseconds(ttl_ms_ / 3);
					while (!stop_ && Clock::now() < next)
						sleep_ms(5);
					if (stop_)
						break;
					if (!locks->renew(resource_, holder_, token_, ttl_ms_)) {
						lost_ = true;
						break;
					}
				}
			} catch (const std::exception &) {
				lost_ = true; // the lock manager went away: the lease cannot be trusted
			}
		});
	}
	~Lease()
	{
		stop_ = true;
		heartbeat_.join();
	}
	bool lost() const { return lost_; }

  private:
	std::string resource_, holder_;
	long long token_;
	int ttl_ms_;
	std::atomic<bool> stop_{false}, lost_{false};
	std::thread heartbeat_;
};

enum class Outcome { accepted, stale, missing_row, error };

struct WriteResult {
	Outcome outcome;
	std::string stored; // the stored token, when stale
	std::string message;
};

// A fenced write of `payload` to the row of `resource`, as the configured way says.
WriteResult fenced_write(Db &db, const std::string &resource, long long token,
                         const std::string &payload)
{
	Result r(nullptr, PQclear);
	std::string t = std::to_string(token);
	if (options.write == "sql") {
		db.value("BEGIN");
		db.value("SELECT set_config('fencing.token', $1, true)", {t});
		r = db.run(
		    "UPDATE harness.accounts SET payload = $2, writes = writes + 1 WHERE resource = $1",
		    {resource, payload});
	} else {
		r = db.run("SELECT fencing.fenced_update('harness.accounts', "
		           "jsonb_build_object('resource', $1::text),"
		           " $2, jsonb_build_object('payload', $3::text))",
		           {resource, t, payload});
	}
	const char *state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
	std::string sqlstate = state ? state : "";
	WriteResult w{Outcome::accepted, "", ""};
	if (sqlstate == "23T01") {
		w.outcome = Outcome::stale;
		std::string detail = PQresultErrorField(r.get(), PG_DIAG_MESSAGE_DETAIL) ?: "";
		auto at = detail.find("stored token ");
		if (at != std::string::npos)
			w.stored =
			    detail.substr(at + 13, detail.find_first_not_of("0123456789", at + 13) - at - 13);
	} else if (sqlstate == "P0002") {
		w.outcome = Outcome::missing_row;
	} else if (!sqlstate.empty()) {
		w.outcome = Outcome::error;
		w.message = Db::first_line(PQresultErrorMessage(r.get()));
	}
	if (options.write == "sql")
		db.value(w.outcome == Outcome::accepted ? "COMMIT" : "ROLLBACK");
	// The seed design: a rejected writer rolls back, cleans up and records a dead letter.
	if (w.outcome != Outcome::accepted)
		db.value(
		    "INSERT INTO harness.dead_letters (resource, token, reason) VALUES ($1, $2, $3)",
		    {resource, t, w.outcome == Outcome::stale ? "stale token" : "error: " + w.message});
	return w;
}

// ------------------------------------------------------------ scripted mode

// Takes the lease on order:101 for `who`, or fails if it is not free.
long long take_order_lease(LockManager &locks, const char *who, const char *holder)
{
	auto token = locks.acquire("order:101", holder, 10 * options.scale_ms);
	if (!token)
		fail("worker %s: the lease on order:101 was not free", who);
	return *token;
}

// Worker A: acquires at t=0, works, and writes when it can; the orchestrator
// freezes it at t=2 and thaws it at t=14.
void worker_a()
{
	auto locks = lock_manager();
	Db db;
	long long token = take_order_lease(*locks, "A", "worker-a");
	event("A", "acquires the lease on order:101 (TTL 10 s): token %lld", token);
	{
		Lease lease("order:101", "worker-a", token, 10 * options.scale_ms);
		event("A", "starts its write; heartbeat renews every 3.3 s");
		until(3); // the work; A is frozen at t=2, in the middle of it
		event("A", "thawed: writes status=cancelled with token %lld (lease %s)", token,
		      lease.lost() ? "lost, it does not check" : "believed held");
		WriteResult w = fenced_write(db, "order:101", token, "cancelled by A");
		if (w.outcome == Outcome::stale)
			event("storage", "token %lld rejected (stored %s)", token, w.stored.c_str());
		else
			event("storage", "token %lld %s", token,
			      w.outcome == Outcome::accepted ? "ACCEPTED" : w.message.c_str());
		for (int i = 0; i < 100 && !lease.lost(); i++)
			sleep_ms(10);
		event("A", "its heartbeat reports the lease %s", lease.lost() ? "lost" : "still held");
	}
	locks->release("order:101", "worker-a", token);
	std::exit(0);
}

// Worker B: acquires once A's lease has expired, and writes.
void worker_b()
{
	auto locks = lock_manager();
	Db db;
	long long token = take_order_lease(*locks, "B", "worker-b");
	event("B", "acquires the lease on order:101: token %lld", token);
	WriteResult w = fenced_write(db, "order:101", token, "paid by B");
	event("B", "writes status=paid with token %lld: %s", token,
	      w.outcome == Outcome::accepted ? "accepted" : "REJECTED");
	locks->release("order:101", "worker-b", token);
	std::exit(w.outcome == Outcome::accepted ? 0 : 1);
}

pid_t spawn(void (*body)())
{
	std::fflush(nullptr);
	pid_t pid = fork();
	if (pid < 0)
		fail("fork: %s", std::strerror(errno));
	if (pid == 0) {
		try {
			body();
		} catch (const std::exception &e) {
			std::fprintf(stderr, "fencing-harness: worker: %s\n", e.what());
			_exit(2);
		}
		_exit(0);
	}
	return pid;
}

int scripted()
{
	Db db;
	// Redis' counter has granted 32 tokens on order:101 before today (docs/design.md's
	// 33 and 34 come next); PostgreSQL's tokens follow the server clock.
	if (options.locks == "pg")
		db.value("DELETE FROM fencing.resources WHERE resource = 'order:101'");
	else
		RedisLocks().set_counter("order:101", 32);
	std::printf("\nGC-pause split-brain on order:101, real worker processes "
	            "(1 s of schedule = %d ms; %s leases; writes through %s%s)\n\n",
	            options.scale_ms, options.locks == "pg" ? "PostgreSQL" : "Redis",
	            options.write == "sql" ? "SET LOCAL fencing.token + UPDATE" : "fenced_update()",
	            options.citus ? "; a Citus distributed table, through the coordinator" : "");
	std::fflush(stdout);
	started = Clock::now();
	pid_t a = spawn(worker_a);
	until(2);
	kill(a, SIGSTOP);
	event("chaos", "SIGSTOP worker A (pid %d): a stop-the-world pause, heartbeat included", a);
	until(11);
	event("lease", "A's lease expired at t=10; A knows nothing");
	until(13);
	pid_t b = spawn(worker_b);
	int status;
	waitpid(b, &status, 0);
	until(14);
	event("chaos", "SIGCONT worker A");
	kill(a, SIGCONT);
	waitpid(a, &status, 0);

	std::string row =
	    db.value("SELECT payload || ', token ' || last_fencing_token FROM harness.accounts"
	             " WHERE resource = 'order:101'");
	std::string dead =
	    db.value("SELECT count(*) FROM harness.dead_letters WHERE reason = 'stale token'");
	std::printf("\norder:101 now: %s; dead letters: %s\n", row.c_str(), dead.c_str());
	bool ok = row.rfind("paid by B", 0) == 0 && dead == "1";
	if (options.citus) {
		// The shard's history of accepted tokens: B's alone.
		std::string history = db.value("SELECT history::text FROM harness.accounts"
		                               " WHERE resource = 'order:101'");
		std::string b_token = db.value("SELECT last_fencing_token::text FROM harness.accounts"
		                               " WHERE resource = 'order:101'");
		std::printf("order:101 tokens accepted (history, from the shard): %s\n", history.c_str());
		ok = ok && history == "{" + b_token + "}";
	}
	std::printf("%s\n", ok ? "split brain prevented: the stale write was refused by the storage"
	                       : "FAILED: the stale write was not refused");
	return ok ? 0 : 1;
}

// --------------------------------------------------------------- chaos mode

// One chaos worker: acquire a random resource, work, write, release; forever.
void chaos_worker(int index)
{
	std::mt19937 random(options.seed * 7919u + static_cast<unsigned>(index) * 104729u +
	                    static_cast<unsigned>(getpid()));
	std::string holder = "w" + std::to_string(index) + "-" + std::to_string(getpid());
	std::unique_ptr<LockManager> locks;
	std::unique_ptr<Db> db;
	for (long iteration = 0;; iteration++) {
		try {
			if (!locks)
				locks = lock_manager();
			if (!db)
				db = std::make_unique<Db>();
			std::string resource = "res:" + std::to_string(random() % options.resources);
			auto token = locks->acquire(resource, holder, options.ttl_ms);
			if (!token) {
				sleep_ms(5 + random() % 20);
				continue;
			}
			{
				Lease lease(resource, holder, *token, options.ttl_ms);
				sleep_ms(random() % (options.ttl_ms / 2)); // the work
				fenced_write(*db, resource, *token, holder + "#" + std::to_string(iteration));
			}
			locks->release(resource, holder, *token);
		} catch (const std::exception &) {
			// Redis restarting under us, or a failed statement: reconnect and go on.
			locks.reset();
			db.reset();
			sleep_ms(50);
		}
	}
}

int chaos_index = 0;
void chaos_body()
{
	chaos_worker(chaos_index);
}

pid_t spawn_worker(int index)
{
	chaos_index = index;
	return spawn(chaos_body);
}

// The checker on Citus: the same invariants, from each row's history of
// accepted tokens (appended on the shard, in the order the row lock
// What the two checkers found, printed alike; the run's verdict.
struct Findings {
	const char *title;
	const char *accepted_label;
	std::string accepted, rejected, errors, decreasing, after_reset, regressed_rejected;
	const char *untracked; // Citus: rows whose token is not their history's last, else nullptr
};

int report(const Findings &f, const std::map<std::string, long> &counts, long long reset_mark)
{
	long violations = std::stol(f.decreasing) + std::stol(f.after_reset) +
	                  (f.untracked != nullptr ? std::stol(f.untracked) : 0);
	std::printf("\n%-52s %10s\n", f.title, "count");
	std::printf("%-52s %10s\n", f.accepted_label, f.accepted.c_str());
	std::printf("%-52s %10s\n", "writes rejected: stale token (23T01)", f.rejected.c_str());
	std::printf("%-52s %10s\n", "writes failed otherwise", f.errors.c_str());
	for (auto &[what, n] : counts)
		std::printf("%-52s %10ld\n", what.c_str(), n);
	if (reset_mark > 0)
		std::printf("%-52s %10s\n", "rejected writes with tokens regressed by the reset",
		            f.regressed_rejected.c_str());
	std::printf("%-52s %10s\n", "accepted writes older than an accepted one", f.decreasing.c_str());
	if (f.untracked != nullptr)
		std::printf("%-52s %10s\n", "rows whose token is not their history's last", f.untracked);
	if (reset_mark > 0)
		std::printf("%-52s %10s\n", "accepted writes with regressed tokens", f.after_reset.c_str());
	std::printf("%-52s %10ld\n", "invariant violations", violations);
	bool ok = violations == 0 && std::stol(f.rejected) > 0 && std::stol(f.accepted) > 0 &&
	          std::stol(f.errors) == 0 && (reset_mark == 0 || std::stol(f.regressed_rejected) > 0);
	std::printf("%s\n",
	            ok ? "chaos passed: no stale write was accepted, and stale writers were refused"
	               : "chaos FAILED");
	return ok ? 0 : 1;
}

// serialized the writes) and the coordinator's dead letters.
int check_citus(Db &db, const std::map<std::string, long> &counts, long long reset_mark)
{
	// strict mode: per resource, history is strictly increasing, so every accepted
	// token is greater than all accepted before it.
	std::string decreasing = db.value("SELECT count(*) FROM harness.accounts a CROSS JOIN LATERAL "
	                                  "generate_subscripts(a.history, 1) i"
	                                  " WHERE i > 1 AND a.history[i] <= a.history[i - 1]");
	std::string accepted =
	    db.value("SELECT coalesce(sum(cardinality(history)), 0) FROM harness.accounts");
	// The history follows the stored token: its last entry is the row's token.
	std::string untracked =
	    db.value("SELECT count(*) FROM harness.accounts WHERE cardinality(history) > 0"
	             " AND history[cardinality(history)] <> last_fencing_token");
	std::string rejected =
	    db.value("SELECT count(*) FROM harness.dead_letters WHERE reason = 'stale token'");
	std::string errors =
	    db.value("SELECT count(*) FROM harness.dead_letters WHERE reason <> 'stale token'");
	std::string after_reset = "0", regressed_rejected = "0";
	if (reset_mark > 0) {
		// Per resource, tokens at or below its last token accepted before the reset
		// (harness.reset_marks: the histories' lengths and last tokens then).
		after_reset =
		    db.value("WITH h AS MATERIALIZED (SELECT resource, history FROM harness.accounts)"
		             " SELECT count(*) FROM h JOIN harness.reset_marks m USING (resource)"
		             " CROSS JOIN LATERAL generate_subscripts(h.history, 1) i"
		             " WHERE i > m.accepted AND h.history[i] <= m.token");
		regressed_rejected = db.value(
		    "WITH reset AS (SELECT at FROM harness.events WHERE what = 'redis reset')"
		    " SELECT count(*) FROM harness.dead_letters x JOIN harness.reset_marks m USING "
		    "(resource),"
		    " reset WHERE x.at > reset.at AND x.token <= m.token AND x.reason = 'stale token'");
	}
	return report(Findings{"chaos summary (Citus: history on the shards)",
	                       "writes accepted (entries in history)", accepted, rejected, errors,
	                       decreasing, after_reset, regressed_rejected, untracked.c_str()},
	              counts, reset_mark);
}

// The checker: the invariants, from the database alone.
int check(Db &db, const std::map<std::string, long> &counts, long long reset_mark)
{
	if (options.citus)
		return check_citus(db, counts, reset_mark);
	// strict mode: every accepted token is greater than all accepted before it on its row.
	std::string decreasing = db.value(
	    "SELECT count(*) FROM (SELECT token <= max(token) OVER (PARTITION BY resource ORDER BY seq"
	    " ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS older FROM harness.audit) a WHERE "
	    "older");
	std::string accepted = db.value("SELECT count(*) FROM harness.audit");
	std::string rejected =
	    db.value("SELECT count(*) FROM harness.dead_letters WHERE reason = 'stale token'");
	std::string errors =
	    db.value("SELECT count(*) FROM harness.dead_letters WHERE reason <> 'stale token'");
	std::string after_reset = "0", regressed_rejected = "0";
	if (reset_mark > 0) {
		// Per resource, tokens at or below its highest token accepted before the reset.
		const char *regressed =
		    "WITH reset AS (SELECT at FROM harness.events WHERE what = 'redis reset'),"
		    " mark AS (SELECT resource, max(token) AS token FROM harness.audit, reset"
		    "          WHERE audit.at < reset.at GROUP BY resource)"
		    " SELECT count(*) FROM %s x JOIN mark USING (resource), reset"
		    " WHERE x.at > reset.at AND x.token <= mark.token %s";
		char sql[1024];
		std::snprintf(sql, sizeof sql, regressed, "harness.audit", "");
		after_reset = db.value(sql);
		std::snprintf(sql, sizeof sql, regressed, "harness.dead_letters",
		              "AND reason = 'stale token'");
		regressed_rejected = db.value(sql);
	}
	return report(Findings{"chaos summary", "writes accepted", accepted, rejected, errors,
	                       decreasing, after_reset, regressed_rejected, nullptr},
	              counts, reset_mark);
}

int chaos()
{
	Db db;
	std::mt19937 random(options.seed);
	std::printf(
	    "\nchaos: %d workers, %d resources, %d s, TTL %d ms, %s leases, writes through %s, "
	    "seed %u%s\n",
	    options.workers, options.resources, options.seconds, options.ttl_ms,
	    options.locks == "pg" ? "PostgreSQL" : "Redis",
	    options.write == "sql" ? "SET LOCAL fencing.token" : "fenced_update()", options.seed,
	    options.citus ? ", through a Citus coordinator (accounts distributed by resource)" : "");
	std::fflush(stdout);
	started = Clock::now();
	std::vector<pid_t> workers;
	for (int i = 0; i < options.workers; i++)
		workers.push_back(spawn_worker(i));
	std::map<std::string, long> counts{{"pauses injected (SIGSTOP > TTL)", 0},
	                                   {"workers killed and restarted (SIGKILL)", 0},
	                                   {"redis restarts without persistence", 0}};
	long long reset_mark = 0;
	bool reset_done = false, reseeded = false;
	double end = options.seconds * 1000.0;
	while (elapsed_ms() < end) {
		sleep_ms(options.ttl_ms / 2 + random() % options.ttl_ms);
		int victim = static_cast<int>(random() % workers.size());
		if (random() % 4 == 0) {
			kill(workers[victim], SIGKILL);
			waitpid(workers[victim], nullptr, 0);
			workers[victim] = spawn_worker(victim);
			counts["workers killed and restarted (SIGKILL)"]++;
		} else {
			// Freeze the victim for longer than its TTL; others take over meanwhile.
			kill(workers[victim], SIGSTOP);
			counts["pauses injected (SIGSTOP > TTL)"]++;
			sleep_ms(options.ttl_ms * 3 / 2 + random() % options.ttl_ms);
			kill(workers[victim], SIGCONT);
		}
		if (options.locks == "redis" && !reset_done && elapsed_ms() > end / 3) {
			// Redis restarts without persistence: every counter starts again from 0.
			if (options.citus) {
				// Each history's length and last token now: the marks of the reset.
				db.value("INSERT INTO harness.reset_marks (resource, accepted, token)"
				         " SELECT resource, cardinality(history),"
				         " coalesce(history[cardinality(history)], 0) FROM harness.accounts");
				reset_mark =
				    std::stoll(db.value("SELECT coalesce(max(token), 0) FROM harness.reset_marks"));
			} else
				reset_mark =
				    std::stoll(db.value("SELECT coalesce(max(token), 0) FROM harness.audit"));
			stop_redis();
			db.value("INSERT INTO harness.events (what) VALUES ('redis reset')");
			start_redis();
			counts["redis restarts without persistence"]++;
			reset_done = true;
		}
		if (reset_done && !reseeded && elapsed_ms() > end * 2 / 3) {
			// The fix (docs/drivers.md): reseed each counter above the stored high-water mark.
			RedisLocks redis;
			for (int r = 0; r < options.resources; r++)
				redis.set_counter("res:" + std::to_string(r),
				                  std::stoll(db.value("SELECT coalesce(max(last_fencing_token), 0)"
				                                      " FROM harness.accounts")));
			reseeded = true;
		}
	}
	for (pid_t w : workers) {
		kill(w, SIGCONT);
		kill(w, SIGKILL);
		waitpid(w, nullptr, 0);
	}
	return check(db, counts, reset_mark);
}

// ------------------------------------------------------------------- setup

// On a Citus coordinator: accounts distributed by resource, then protected;
// each accepted token appended to the row's history on the shard.
void setup_citus_schema(Db &db)
{
	if (db.value("SELECT count(*) FROM pg_extension WHERE extname = 'citus'") != "1")
		fail("--citus: the citus extension is not created in this database");
	// The table first, by name: DROP TABLE also drops its marks table, DROP SCHEMA
	// ... CASCADE does not (and fails when its OID names a shard on a worker).
	db.value("DROP TABLE IF EXISTS harness.accounts");
	db.value("DROP SCHEMA IF EXISTS harness CASCADE");
	db.value("CREATE SCHEMA harness");
	db.value("CREATE TABLE harness.accounts (resource text PRIMARY KEY, payload text, writes int "
	         "NOT NULL DEFAULT 0, history bigint[] NOT NULL DEFAULT '{}')");
	db.value("SELECT create_distributed_table('harness.accounts', 'resource')");
	db.value("SELECT fencing.protect('harness.accounts', mode => 'strict')");
	db.value("INSERT INTO harness.accounts (resource, payload, last_fencing_token)"
	         " SELECT 'res:' || g, 'new', 1 FROM generate_series(0, 99) g"
	         " UNION ALL SELECT 'order:101', 'new', 1");
	// PostgreSQL fires triggers in name order: zz_history runs after fencing_guard
	// has set NEW's token to the one presented.  Citus refuses triggers on a
	// distributed table unless allowed, here for this transaction only.
	db.value("BEGIN");
	db.value("SET LOCAL citus.enable_unsafe_triggers = on");
	db.value("CREATE FUNCTION harness.history() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
	         " NEW.history := NEW.history || NEW.last_fencing_token; RETURN NEW; END $$");
	db.value("CREATE TRIGGER zz_history BEFORE UPDATE ON harness.accounts FOR EACH ROW EXECUTE "
	         "FUNCTION harness.history()");
	db.value("COMMIT");
	// Local tables on the coordinator, written through it.
	db.value(
	    "CREATE TABLE harness.dead_letters (id bigserial PRIMARY KEY, resource text, token bigint,"
	    " reason text, at timestamptz DEFAULT clock_timestamp())");
	db.value("CREATE TABLE harness.events (what text, at timestamptz DEFAULT clock_timestamp())");
	db.value("CREATE TABLE harness.reset_marks (resource text PRIMARY KEY, accepted int NOT NULL,"
	         " token bigint NOT NULL)");
}

void setup_schema()
{
	Db db;
	db.value("CREATE EXTENSION IF NOT EXISTS fencing");
	if (options.citus) {
		setup_citus_schema(db);
		return;
	}
	db.value("DROP SCHEMA IF EXISTS harness CASCADE");
	db.value("CREATE SCHEMA harness");
	db.value("CREATE TABLE harness.accounts (resource text PRIMARY KEY, payload text, writes int "
	         "NOT NULL DEFAULT 0)");
	// strict: one write per grant, so a token issued twice is refused even when equal.
	db.value("SELECT fencing.protect('harness.accounts', mode => 'strict')");
	db.value("INSERT INTO harness.accounts (resource, payload, last_fencing_token)"
	         " SELECT 'res:' || g, 'new', 1 FROM generate_series(0, 99) g"
	         " UNION ALL SELECT 'order:101', 'new', 1");
	db.value(
	    "CREATE TABLE harness.dead_letters (id bigserial PRIMARY KEY, resource text, token bigint,"
	    " reason text, at timestamptz DEFAULT clock_timestamp())");
	db.value("CREATE TABLE harness.events (what text, at timestamptz DEFAULT clock_timestamp())");
	// Every accepted write, in the order the row lock serialized them.
	db.value("CREATE TABLE harness.audit (seq bigserial PRIMARY KEY, resource text, token bigint,"
	         " payload text, at timestamptz DEFAULT clock_timestamp())");
	db.value("CREATE FUNCTION harness.audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
	         " INSERT INTO harness.audit (resource, token, payload)"
	         " VALUES (NEW.resource, NEW.last_fencing_token, NEW.payload); RETURN NULL; END $$");
	db.value("CREATE TRIGGER audit AFTER UPDATE ON harness.accounts FOR EACH ROW EXECUTE FUNCTION "
	         "harness.audit()");
}

Options parse(int argc, char **argv)
{
	Options o;
	if (argc < 2 || (std::string(argv[1]) != "scripted" && std::string(argv[1]) != "chaos"))
		fail("usage: fencing-harness scripted|chaos [options] (see the comment at the top of "
		     "harness.cpp)");
	o.mode = argv[1];
	auto number = [](const std::string &name, const char *text) {
		char *end;
		long v = std::strtol(text, &end, 10);
		if (*end != '\0' || v <= 0)
			fail("%s takes a positive integer, not '%s'", name.c_str(), text);
		return static_cast<int>(v);
	};
	for (int i = 2; i < argc; i++) {
		std::string a = argv[i];
		if (a == "--citus") {
			o.citus = true;
			continue;
		}
		if (i + 1 >= argc)
			fail("unknown option or missing value: %s", a.c_str());
		const char *v = argv[++i];
		if (a == "--locks" && (std::string(v) == "pg" || std::string(v) == "redis"))
			o.locks = v;
		else if (a == "--write" && (std::string(v) == "fenced" || std::string(v) == "sql"))
			o.write = v;
		else if (a == "--scale")
			o.scale_ms = number(a, v);
		else if (a == "--workers")
			o.workers = number(a, v);
		else if (a == "--resources")
			o.resources = number(a, v);
		else if (a == "--seconds")
			o.seconds = number(a, v);
		else if (a == "--ttl")
			o.ttl_ms = number(a, v);
		else if (a == "--seed")
			o.seed = static_cast<unsigned>(number(a, v));
		else if (a == "--redis-dir")
			o.redis_dir = v;
		else
			fail("unknown option or bad value: %s %s", a.c_str(), v);
	}
	if (o.ttl_ms < 60)
		fail("--ttl must be at least 60 ms");
	if (o.resources > 100)
		fail("--resources must be at most 100");
	return o;
}

} // namespace

int main(int argc, char **argv)
{
	options = parse(argc, argv);
	options.redis_port = 20000 + static_cast<int>(getpid() % 20000);
	std::signal(SIGPIPE, SIG_IGN);
	int rc;
	try {
		setup_schema();
		if (options.locks == "redis")
			start_redis();
		rc = options.mode == "scripted" ? scripted() : chaos();
	} catch (const std::exception &e) {
		stop_redis();
		fail("%s", e.what());
	}
	stop_redis();
	return rc;
}
