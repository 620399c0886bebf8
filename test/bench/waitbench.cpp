// waitbench: the handoff of a lease to the next waiter - from the COMMIT of
// the release() that frees the lease to the moment the waiter has its token -
// with N waiters queued on one resource (fencing.acquire(..., wait)).
//
//   waitbench --pg CONNINFO [--waiters N] [--rounds R]
//
// A round: a holder takes the lease; the N waiters (threads, a connection
// each) call acquire() with a wait of 30 s; once all N sleep in the queue
// (pg_stat_activity: wait event type Extension), the holder releases in a
// transaction and commits.  Each waiter, once granted, does the same in turn:
// a round gives N handoffs.  A handoff is measured on this machine's
// monotonic clock from the moment the releaser sends its COMMIT (the release
// is made durable and the queue is woken when that commit ends) to the moment
// the next waiter's acquire() returns its token (the grant committed and
// durable too): an upper bound of the commit-to-grant time, with the WAL
// flushes of both commits and of the token's bound in it.  (From the COMMIT's
// acknowledgement instead is no measure: the waiter often has its token
// before the releaser has read that acknowledgement.)  Prints one line:
//   "<handoffs> <p50 ms> <p99 ms> <max ms>"

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace
{

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string &message)
{
	std::fprintf(stderr, "waitbench: %s\n", message.c_str());
	std::exit(1);
}

double ms_between(Clock::time_point from, Clock::time_point to)
{
	return std::chrono::duration<double, std::milli>(to - from).count();
}

// The q-quantile (0..1) of v, nearest rank; v is sorted in place. 0 if empty.
double quantile(std::vector<double> &v, double q)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()));
	return v[std::min(rank, v.size() - 1)];
}

using Connection = std::unique_ptr<PGconn, void (*)(PGconn *)>;
using Result = std::unique_ptr<PGresult, void (*)(PGresult *)>;

Connection connect(const std::string &conninfo)
{
	Connection conn(PQconnectdb(conninfo.c_str()), PQfinish);
	if (PQstatus(conn.get()) != CONNECTION_OK)
		fail(std::string("PostgreSQL: ") + PQerrorMessage(conn.get()));
	return conn;
}

// Runs sql with text parameters; fails unless it succeeds.
Result run(PGconn *conn, const char *sql, std::vector<const char *> params = {})
{
	Result r(PQexecParams(conn, sql, static_cast<int>(params.size()), nullptr, params.data(),
	                      nullptr, nullptr, 0),
	         PQclear);
	ExecStatusType status = PQresultStatus(r.get());
	if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
		fail(std::string("PostgreSQL: ") + PQerrorMessage(conn));
	return r;
}

// The moment the last release's COMMIT was sent, and the handoffs measured.
struct Handoffs {
	std::mutex mutex;
	Clock::time_point commit_sent;
	std::vector<double> latencies;
};

// Releases (resource, holder, token) in a transaction, noting when COMMIT is sent.
void release_and_commit(PGconn *conn, const std::string &resource, const std::string &holder,
                        const std::string &token, Handoffs &handoffs)
{
	run(conn, "BEGIN");
	Result r = run(conn, "SELECT fencing.release($1, $2, $3)",
	               {resource.c_str(), holder.c_str(), token.c_str()});
	if (std::strcmp(PQgetvalue(r.get(), 0, 0), "t") != 0)
		fail("a release found its lease lost");
	{
		std::lock_guard<std::mutex> lock(handoffs.mutex);
		handoffs.commit_sent = Clock::now();
	}
	run(conn, "COMMIT");
}

// The rounds: a waiter thread waits for round r to start, acquires, releases.
struct Rounds {
	std::mutex mutex;
	std::condition_variable changed;
	int started = 0;  // rounds begun
	int finished = 0; // waiters done with the current round
};

} // namespace

int main(int argc, char **argv)
{
	std::string conninfo;
	int waiters = 1, rounds = 20;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (i + 1 >= argc)
			fail("usage: waitbench --pg CONNINFO [--waiters N] [--rounds R]");
		if (a == "--pg")
			conninfo = argv[++i];
		else if (a == "--waiters")
			waiters = std::atoi(argv[++i]);
		else if (a == "--rounds")
			rounds = std::atoi(argv[++i]);
		else
			fail("unknown option " + a);
	}
	if (conninfo.empty() || waiters < 1 || rounds < 1)
		fail("usage: waitbench --pg CONNINFO [--waiters N] [--rounds R]");

	Connection holder = connect(conninfo);
	Handoffs handoffs;
	Rounds state;
	std::string resource;
	std::vector<std::thread> threads;
	std::atomic<bool> failed{false};
	for (int w = 0; w < waiters; w++) {
		threads.emplace_back([&, w]() {
			Connection conn = connect(conninfo + " application_name=waitbench");
			std::string name = "waiter-" + std::to_string(w);
			for (int r = 1; r <= rounds; r++) {
				std::string current;
				{
					std::unique_lock<std::mutex> lock(state.mutex);
					state.changed.wait(lock, [&]() { return state.started >= r; });
					current = resource;
				}
				Result got = run(conn.get(), "SELECT fencing.acquire($1, $2, '60 s', '30 s')",
				                 {current.c_str(), name.c_str()});
				Clock::time_point granted = Clock::now();
				if (PQgetisnull(got.get(), 0, 0)) {
					failed = true;
					fail("a waiter was not granted within 30 s");
				}
				std::string token = PQgetvalue(got.get(), 0, 0);
				{
					std::lock_guard<std::mutex> lock(handoffs.mutex);
					handoffs.latencies.push_back(ms_between(handoffs.commit_sent, granted));
				}
				release_and_commit(conn.get(), current, name, token, handoffs);
				std::lock_guard<std::mutex> lock(state.mutex);
				state.finished++;
				state.changed.notify_all();
			}
		});
	}
	std::string pid = std::to_string(getpid());
	for (int r = 1; r <= rounds; r++) {
		std::string current =
		    "handoff:" + pid + ":" + std::to_string(waiters) + ":" + std::to_string(r);
		Result got =
		    run(holder.get(), "SELECT fencing.acquire($1, 'holder', '60 s')", {current.c_str()});
		if (PQgetisnull(got.get(), 0, 0))
			fail("the holder was not granted");
		std::string token = PQgetvalue(got.get(), 0, 0);
		{
			std::lock_guard<std::mutex> lock(state.mutex);
			resource = current;
			state.finished = 0;
			state.started = r;
			state.changed.notify_all();
		}
		// Every waiter asleep in the queue before the release.
		for (int polls = 0;; polls++) {
			Result n =
			    run(holder.get(), "SELECT count(*) FROM pg_stat_activity"
			                      " WHERE application_name = 'waitbench' AND state = 'active'"
			                      " AND wait_event_type = 'Extension'");
			if (std::atoi(PQgetvalue(n.get(), 0, 0)) == waiters)
				break;
			if (polls > 20000)
				fail("the waiters did not all wait");
			std::this_thread::sleep_for(std::chrono::microseconds(500));
		}
		release_and_commit(holder.get(), current, "holder", token, handoffs);
		std::unique_lock<std::mutex> lock(state.mutex);
		state.changed.wait(lock, [&]() { return state.finished == waiters; });
	}
	for (auto &t : threads)
		t.join();
	run(holder.get(), "DELETE FROM fencing.resources WHERE resource LIKE 'handoff:%'");
	if (failed)
		return 1;
	std::vector<double> &v = handoffs.latencies;
	double max = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
	std::printf("%zu %.3f %.3f %.3f\n", v.size(), quantile(v, 0.5), quantile(v, 0.99), max);
	return 0;
}
