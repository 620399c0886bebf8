// leasebench: lease operations, PostgreSQL (fencing.acquire/renew/release)
// against Redis running the seed design's Lua scripts, with the same client
// code shape: one connection per client thread, one round trip per call.
//
//   leasebench --pg CONNINFO | --redis HOST:PORT  --op acquire-release|renew|fleet
//              [--clients N] [--seconds S]
//              fleet only: [--leases N] [--ttl S] [--churn F] [--interval S] [--seed N]
//
// acquire-release and renew are closed loops (each client calls as fast as it
// can, on a resource of its own) and print one line:
//   "<ops per second> <operations> <p50 ms> <p99 ms>"
// (an acquire-release operation is the pair: two round trips).
//
// fleet is an open loop, a fleet of workers keeping --leases live leases
// (default 10,000) with a TTL of --ttl seconds (default 30), each renewed every
// TTL/3 on a fixed schedule, spread over --clients connections (threads; a
// lease stays with its thread); a fraction --churn (default 0.1) of the
// renewals are replaced by churn: release the lease and acquire a new
// resource, never used before (a worker moving on to the next job). The
// leases are acquired first (not measured); then every --interval seconds
// (default 30) it prints a CSV row (header first) with the calls of the
// interval - a call is one round trip: renew, release or acquire - their
// latency percentiles, the schedule lag (how late the most behind renewal
// started: a system that keeps up stays near 0), the leases lost (a renew
// that found its lease expired or taken: the schedule was missed by a whole
// TTL/3 x 2), and the state of the store: for PostgreSQL the size of
// fencing.resources (table, indexes, rows, and from pg_stat_user_tables dead
// tuples, HOT updates of the interval and autovacuum runs), for Redis its
// memory, AOF size and keys. A last row, t_s = "all", sums up the whole run.

#include "../harness/redis_locks.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

namespace
{

using Clock = std::chrono::steady_clock;

struct Options {
	std::string pg, redis, op = "acquire-release";
	int clients = 1;
	double seconds = 5;
	long leases = 10000;
	double ttl = 30, churn = 0.1, interval = 30;
	unsigned seed = 1;
};

[[noreturn]] void fail(const std::string &message)
{
	std::fprintf(stderr, "leasebench: %s\n", message.c_str());
	std::exit(1);
}

double ms_since(Clock::time_point t)
{
	return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
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

// One client connection: the three lease calls. A token is kept as text
// (PostgreSQL) or as a number printed as text (Redis); "" means refused.
class Client
{
  public:
	virtual ~Client() = default;
	virtual std::string acquire(const std::string &resource, const std::string &holder) = 0;
	virtual bool renew(const std::string &resource, const std::string &holder,
	                   const std::string &token) = 0;
	virtual bool release(const std::string &resource, const std::string &holder,
	                     const std::string &token) = 0;
};

using Result = std::unique_ptr<PGresult, void (*)(PGresult *)>;

class PgClient : public Client
{
  public:
	PgClient(const std::string &conninfo, double ttl_seconds)
	    : conn_(PQconnectdb(conninfo.c_str()), PQfinish), ttl_(std::to_string(ttl_seconds) + " s")
	{
		if (PQstatus(conn_.get()) != CONNECTION_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
		prepare("acquire", "SELECT fencing.acquire($1, $2, $3)", 3);
		prepare("release", "SELECT fencing.release($1, $2, $3)", 3);
		prepare("renew", "SELECT fencing.renew($1, $2, $3, $4)", 4);
	}
	std::string acquire(const std::string &resource, const std::string &holder) override
	{
		Result r = call("acquire", {resource.c_str(), holder.c_str(), ttl_.c_str()});
		return PQgetisnull(r.get(), 0, 0) ? "" : PQgetvalue(r.get(), 0, 0);
	}
	bool renew(const std::string &resource, const std::string &holder,
	           const std::string &token) override
	{
		Result r = call("renew", {resource.c_str(), holder.c_str(), token.c_str(), ttl_.c_str()});
		return std::strcmp(PQgetvalue(r.get(), 0, 0), "t") == 0;
	}
	bool release(const std::string &resource, const std::string &holder,
	             const std::string &token) override
	{
		Result r = call("release", {resource.c_str(), holder.c_str(), token.c_str()});
		return std::strcmp(PQgetvalue(r.get(), 0, 0), "t") == 0;
	}

  private:
	void prepare(const char *name, const char *sql, int nparams)
	{
		Result r(PQprepare(conn_.get(), name, sql, nparams, nullptr), PQclear);
		if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
	}
	Result call(const char *name, std::vector<const char *> params)
	{
		Result r(PQexecPrepared(conn_.get(), name, static_cast<int>(params.size()), params.data(),
		                        nullptr, nullptr, 0),
		         PQclear);
		if (PQresultStatus(r.get()) != PGRES_TUPLES_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
		return r;
	}
	std::unique_ptr<PGconn, void (*)(PGconn *)> conn_;
	std::string ttl_;
};

std::string host_of(const std::string &address)
{
	auto colon = address.rfind(':');
	if (colon == std::string::npos)
		fail("--redis takes HOST:PORT");
	return address.substr(0, colon);
}

int port_of(const std::string &address)
{
	return std::atoi(address.c_str() + address.rfind(':') + 1);
}

class RedisClient : public Client
{
  public:
	RedisClient(const std::string &address, double ttl_seconds)
	    : redis_(host_of(address), port_of(address)), ttl_ms_(static_cast<int>(ttl_seconds * 1000))
	{
	}
	std::string acquire(const std::string &resource, const std::string &holder) override
	{
		long long token = redis_.acquire(resource, holder, ttl_ms_);
		return token == 0 ? "" : std::to_string(token);
	}
	// The seed design's scripts check the holder only: the token is not theirs.
	bool renew(const std::string &resource, const std::string &holder, const std::string &) override
	{
		return redis_.renew(resource, holder, ttl_ms_);
	}
	bool release(const std::string &resource, const std::string &holder,
	             const std::string &) override
	{
		return redis_.release(resource, holder);
	}

  private:
	redis_locks::Connection redis_;
	int ttl_ms_;
};

std::unique_ptr<Client> connect(const Options &o)
{
	if (!o.pg.empty())
		return std::make_unique<PgClient>(o.pg, o.ttl);
	return std::make_unique<RedisClient>(o.redis, o.ttl);
}

Options parse(int argc, char **argv)
{
	Options o;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		auto value = [&]() -> std::string {
			if (i + 1 >= argc)
				fail("option " + a + " needs a value");
			return argv[++i];
		};
		if (a == "--pg")
			o.pg = value();
		else if (a == "--redis")
			o.redis = value();
		else if (a == "--op")
			o.op = value();
		else if (a == "--clients")
			o.clients = std::atoi(value().c_str());
		else if (a == "--seconds")
			o.seconds = std::atof(value().c_str());
		else if (a == "--leases")
			o.leases = std::atol(value().c_str());
		else if (a == "--ttl")
			o.ttl = std::atof(value().c_str());
		else if (a == "--churn")
			o.churn = std::atof(value().c_str());
		else if (a == "--interval")
			o.interval = std::atof(value().c_str());
		else if (a == "--seed")
			o.seed = static_cast<unsigned>(std::atol(value().c_str()));
		else
			fail("unknown option " + a);
	}
	if (o.pg.empty() == o.redis.empty())
		fail("give exactly one of --pg CONNINFO and --redis HOST:PORT");
	if (o.op != "acquire-release" && o.op != "renew" && o.op != "fleet")
		fail("--op is acquire-release, renew or fleet");
	if (o.clients < 1 || o.seconds <= 0)
		fail("--clients and --seconds must be positive");
	if (o.op == "fleet" &&
	    (o.leases < o.clients || o.ttl <= 0 || o.interval <= 0 || o.churn < 0 || o.churn > 1))
		fail("fleet: --leases >= --clients, --ttl and --interval > 0, 0 <= --churn <= 1");
	return o;
}

// ---- closed loop: acquire-release and renew ----------------------------------------

int closed_loop(const Options &o)
{
	bool renew = o.op == "renew";
	struct State {
		std::unique_ptr<Client> client;
		std::string resource, holder = "bench", token;
		std::vector<double> latencies_ms;
	};
	std::vector<State> states(o.clients);
	for (int c = 0; c < o.clients; c++) {
		State &s = states[c];
		s.client = connect(o);
		// Each run its own resources, so that no lease of an earlier run is still live.
		s.resource = "bench:" + o.op + ":" + std::to_string(getpid()) + ":" + std::to_string(c);
		s.latencies_ms.reserve(1 << 16);
		if (renew && (s.token = s.client->acquire(s.resource, s.holder)).empty())
			fail("acquire refused a free resource");
	}
	std::atomic<bool> stop{false};
	std::vector<std::thread> threads;
	auto start = Clock::now();
	for (int c = 0; c < o.clients; c++)
		threads.emplace_back([&, c] {
			State &s = states[c];
			while (!stop.load(std::memory_order_relaxed)) {
				auto t = Clock::now();
				if (renew) {
					if (!s.client->renew(s.resource, s.holder, s.token))
						fail("renew lost a lease it holds");
				} else {
					std::string token = s.client->acquire(s.resource, s.holder);
					if (token.empty())
						fail("acquire refused a free resource");
					s.client->release(s.resource, s.holder, token);
				}
				s.latencies_ms.push_back(ms_since(t));
			}
		});
	std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
	stop = true;
	for (auto &t : threads)
		t.join();
	double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
	std::vector<double> all;
	for (auto &s : states)
		all.insert(all.end(), s.latencies_ms.begin(), s.latencies_ms.end());
	double p50 = quantile(all, 0.50), p99 = quantile(all, 0.99);
	std::printf("%.1f %zu %.3f %.3f\n", static_cast<double>(all.size()) / elapsed, all.size(), p50,
	            p99);
	return 0;
}

// ---- open loop: the fleet ------------------------------------------------------------

// What the clients measured since the last report; swapped out by the reporter.
struct Sample {
	std::vector<double> renew_ms, acquire_ms, release_ms, lag_ms;
	long lost = 0;
	void append(const Sample &s)
	{
		renew_ms.insert(renew_ms.end(), s.renew_ms.begin(), s.renew_ms.end());
		acquire_ms.insert(acquire_ms.end(), s.acquire_ms.begin(), s.acquire_ms.end());
		release_ms.insert(release_ms.end(), s.release_ms.begin(), s.release_ms.end());
		lag_ms.insert(lag_ms.end(), s.lag_ms.begin(), s.lag_ms.end());
		lost += s.lost;
	}
};

// The store's side: a header and one row of columns, read between intervals.
class Monitor
{
  public:
	virtual ~Monitor() = default;
	virtual std::string header() = 0;
	// Since the last row, or (whole_run) since the start.
	virtual std::string row(bool whole_run) = 0;
};

class PgMonitor : public Monitor
{
  public:
	explicit PgMonitor(const std::string &conninfo) : conn_(PQconnectdb(conninfo.c_str()), PQfinish)
	{
		if (PQstatus(conn_.get()) != CONNECTION_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
		read(); // the starting point of the HOT ratios
		upd_start_ = upd_;
		hot_start_ = hot_;
	}
	std::string header() override
	{
		return "total_bytes,table_bytes,index_bytes,rows,n_dead_tup,"
		       "hot_ratio,autovacuum_count";
	}
	std::string row(bool whole_run) override
	{
		long upd0 = whole_run ? upd_start_ : upd_, hot0 = whole_run ? hot_start_ : hot_;
		std::vector<std::string> v = read();
		long dupd = upd_ - upd0, dhot = hot_ - hot0;
		char hot[32];
		std::snprintf(hot, sizeof hot, "%.3f",
		              dupd > 0 ? static_cast<double>(dhot) / static_cast<double>(dupd) : 0.0);
		return v[0] + "," + v[1] + "," + v[2] + "," + v[3] + "," + v[4] + "," + hot + "," + v[7];
	}

  private:
	std::vector<std::string> read()
	{
		Result r(PQexec(conn_.get(),
		                "SELECT pg_total_relation_size(s.relid), pg_relation_size(s.relid), "
		                "pg_indexes_size(s.relid), (SELECT count(*) FROM fencing.resources), "
		                "s.n_dead_tup, s.n_tup_upd, "
		                "s.n_tup_hot_upd, s.autovacuum_count FROM pg_stat_user_tables s "
		                "WHERE s.relid = 'fencing.resources'::regclass"),
		         PQclear);
		if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1)
			fail(std::string("PostgreSQL monitor: ") + PQerrorMessage(conn_.get()));
		std::vector<std::string> v;
		for (int i = 0; i < 8; i++)
			v.emplace_back(PQgetvalue(r.get(), 0, i));
		upd_ = std::atol(v[5].c_str());
		hot_ = std::atol(v[6].c_str());
		return v;
	}
	std::unique_ptr<PGconn, void (*)(PGconn *)> conn_;
	long upd_ = 0, hot_ = 0, upd_start_ = 0, hot_start_ = 0;
};

class RedisMonitor : public Monitor
{
  public:
	explicit RedisMonitor(const std::string &address) : redis_(host_of(address), port_of(address))
	{
	}
	std::string header() override { return "used_memory,aof_bytes,keys"; }
	std::string row(bool) override
	{
		std::string info = redis_.command({"INFO"})->str;
		long long keys = redis_.command({"DBSIZE"})->integer;
		return field(info, "used_memory") + "," + field(info, "aof_current_size") + "," +
		       std::to_string(keys);
	}

  private:
	static std::string field(const std::string &info, const std::string &name)
	{
		auto at = info.find("\n" + name + ":");
		if (at == std::string::npos)
			return "0";
		at += name.size() + 2;
		return info.substr(at, info.find_first_of("\r\n", at) - at);
	}
	redis_locks::Connection redis_;
};

int fleet(const Options &o)
{
	using Seconds = std::chrono::duration<double>;
	auto period = std::chrono::duration_cast<Clock::duration>(Seconds(o.ttl / 3));
	std::string prefix = "fleet:" + std::to_string(getpid()) + ":";
	struct Lease {
		std::string resource, token;
	};
	struct Worker {
		std::unique_ptr<Client> client;
		std::string holder;
		std::vector<Lease> leases;
		std::mutex mutex;
		Sample sample; // under mutex
	};
	std::vector<Worker> workers(o.clients);
	std::atomic<long> next_resource{0};
	auto new_name = [&] { return prefix + std::to_string(next_resource++); };

	// Acquire the fleet's leases, every worker its share, in parallel.
	{
		std::vector<std::thread> threads;
		for (int c = 0; c < o.clients; c++)
			threads.emplace_back([&, c] {
				Worker &w = workers[c];
				w.client = connect(o);
				w.holder = "worker-" + std::to_string(c);
				long n = o.leases / o.clients + (c < o.leases % o.clients ? 1 : 0);
				for (long i = 0; i < n; i++) {
					Lease l{new_name(), ""};
					if ((l.token = w.client->acquire(l.resource, w.holder)).empty())
						fail("acquire refused a new resource");
					w.leases.push_back(std::move(l));
				}
			});
		for (auto &t : threads)
			t.join();
	}

	std::unique_ptr<Monitor> monitor;
	if (!o.pg.empty())
		monitor = std::make_unique<PgMonitor>(o.pg);
	else
		monitor = std::make_unique<RedisMonitor>(o.redis);

	std::atomic<bool> stop{false};
	auto start = Clock::now();
	std::vector<std::thread> threads;
	for (int c = 0; c < o.clients; c++)
		threads.emplace_back([&, c] {
			Worker &w = workers[c];
			std::mt19937_64 rng(o.seed * 1000003ULL + static_cast<unsigned>(c));
			std::uniform_real_distribution<double> uniform(0, 1);
			// Renewals due, earliest first: spread evenly over the first period.
			using Due = std::pair<Clock::time_point, size_t>;
			std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due;
			size_t n = w.leases.size();
			for (size_t i = 0; i < n; i++)
				due.emplace(start + std::chrono::duration_cast<Clock::duration>(
				                        period * (static_cast<double>(i) + uniform(rng)) /
				                        static_cast<double>(n)),
				            i);
			while (!stop.load(std::memory_order_relaxed)) {
				auto [when, i] = due.top();
				auto now = Clock::now();
				if (when > now) {
					std::this_thread::sleep_until(
					    std::min(when, now + std::chrono::milliseconds(50)));
					continue;
				}
				due.pop();
				Lease &l = w.leases[i];
				double lag = std::chrono::duration<double, std::milli>(now - when).count();
				double renew_ms = -1, release_ms = -1, acquire_ms = -1;
				bool lost = false;
				Clock::time_point next = when + period;
				if (uniform(rng) < o.churn) {
					auto t = Clock::now();
					lost = !w.client->release(l.resource, w.holder, l.token);
					release_ms = ms_since(t);
					l.resource = new_name();
					t = Clock::now();
					l.token = w.client->acquire(l.resource, w.holder);
					acquire_ms = ms_since(t);
					if (l.token.empty())
						fail("acquire refused a new resource");
					next = Clock::now() + period;
				} else {
					auto t = Clock::now();
					lost = !w.client->renew(l.resource, w.holder, l.token);
					renew_ms = ms_since(t);
					if (lost) { // expired: take it again, as a worker would
						t = Clock::now();
						l.token = w.client->acquire(l.resource, w.holder);
						acquire_ms = ms_since(t);
						if (l.token.empty())
							fail("a lost lease was taken by someone else");
						next = Clock::now() + period;
					}
				}
				due.emplace(next, i);
				std::lock_guard<std::mutex> guard(w.mutex);
				w.sample.lag_ms.push_back(lag);
				if (renew_ms >= 0)
					w.sample.renew_ms.push_back(renew_ms);
				if (release_ms >= 0)
					w.sample.release_ms.push_back(release_ms);
				if (acquire_ms >= 0)
					w.sample.acquire_ms.push_back(acquire_ms);
				w.sample.lost += lost ? 1 : 0;
			}
		});

	std::printf("t_s,calls,calls_per_s,renews,churns,p50_ms,p99_ms,renew_p99_ms,acquire_p99_ms,"
	            "release_p99_ms,lag_max_ms,lost,%s\n",
	            monitor->header().c_str());
	std::fflush(stdout);
	Sample total;
	auto report = [&](const std::string &t, Sample &s, double seconds) {
		std::vector<double> all = s.renew_ms;
		all.insert(all.end(), s.acquire_ms.begin(), s.acquire_ms.end());
		all.insert(all.end(), s.release_ms.begin(), s.release_ms.end());
		double lag_max = s.lag_ms.empty() ? 0 : *std::max_element(s.lag_ms.begin(), s.lag_ms.end());
		std::printf("%s,%zu,%.1f,%zu,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%ld,%s\n", t.c_str(),
		            all.size(), static_cast<double>(all.size()) / seconds, s.renew_ms.size(),
		            s.release_ms.size(), quantile(all, 0.5), quantile(all, 0.99),
		            quantile(s.renew_ms, 0.99), quantile(s.acquire_ms, 0.99),
		            quantile(s.release_ms, 0.99), lag_max, s.lost,
		            monitor->row(t == "all").c_str());
		std::fflush(stdout);
	};
	auto last = start;
	for (int k = 1;; k++) {
		auto end = start + std::chrono::duration_cast<Clock::duration>(
		                       Seconds(std::min(o.interval * k, o.seconds)));
		std::this_thread::sleep_until(end);
		bool done = o.interval * k >= o.seconds;
		if (done)
			stop = true;
		Sample s;
		for (auto &w : workers) {
			std::lock_guard<std::mutex> guard(w.mutex);
			s.append(w.sample);
			w.sample = Sample();
		}
		auto now = Clock::now();
		total.append(s);
		char t[32];
		std::snprintf(t, sizeof t, "%.0f", Seconds(now - start).count());
		report(t, s, Seconds(now - last).count());
		last = now;
		if (done)
			break;
	}
	for (auto &t : threads)
		t.join();
	report("all", total, Seconds(last - start).count());
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	try {
		Options o = parse(argc, argv);
		return o.op == "fleet" ? fleet(o) : closed_loop(o);
	} catch (const std::exception &e) {
		fail(e.what());
	}
}
