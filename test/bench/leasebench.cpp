// leasebench: lease operations per second, PostgreSQL (fencing.acquire/renew/
// release) against Redis running the seed design's Lua scripts, with the same
// client code shape: one connection per client thread, one round trip per call.
//
//   leasebench --pg CONNINFO | --redis HOST:PORT  --op acquire-release|renew
//              [--clients N] [--seconds S]
//
// Prints one line: "<ops per second> <operations>".

#include "../harness/redis_locks.hpp"

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace
{

struct Options {
	std::string pg, redis, op = "acquire-release";
	int clients = 1;
	double seconds = 5;
};

[[noreturn]] void fail(const std::string &message)
{
	std::fprintf(stderr, "leasebench: %s\n", message.c_str());
	std::exit(1);
}

// One client: a connection and the two calls of its operation.
class Client
{
  public:
	virtual ~Client() = default;
	virtual void operation() = 0; // one acquire+release pair, or one renew
};

class PgClient : public Client
{
  public:
	PgClient(const std::string &conninfo, const std::string &resource, bool renew)
	    : conn_(PQconnectdb(conninfo.c_str()), PQfinish), resource_(resource), renew_(renew)
	{
		if (PQstatus(conn_.get()) != CONNECTION_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
		prepare("acquire", "SELECT fencing.acquire($1, $2, '10 s')", 2);
		prepare("release", "SELECT fencing.release($1, $2, $3)", 3);
		prepare("renew", "SELECT fencing.renew($1, $2, $3, '10 s')", 3);
		if (renew_)
			token_ = acquire();
	}
	void operation() override
	{
		if (renew_) {
			call("renew", {resource_.c_str(), "bench", token_.c_str()});
			return;
		}
		std::string token = acquire();
		call("release", {resource_.c_str(), "bench", token.c_str()});
	}

  private:
	void prepare(const char *name, const char *sql, int nparams)
	{
		std::unique_ptr<PGresult, void (*)(PGresult *)> r(
		    PQprepare(conn_.get(), name, sql, nparams, nullptr), PQclear);
		if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
	}
	std::string call(const char *name, std::vector<const char *> params)
	{
		std::unique_ptr<PGresult, void (*)(PGresult *)> r(
		    PQexecPrepared(conn_.get(), name, static_cast<int>(params.size()), params.data(),
		                   nullptr, nullptr, 0),
		    PQclear);
		if (PQresultStatus(r.get()) != PGRES_TUPLES_OK)
			fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_.get()));
		return PQgetvalue(r.get(), 0, 0);
	}
	std::string acquire()
	{
		std::string token = call("acquire", {resource_.c_str(), "bench"});
		if (token.empty())
			fail("PostgreSQL: acquire refused a free resource");
		return token;
	}
	std::unique_ptr<PGconn, void (*)(PGconn *)> conn_;
	std::string resource_, token_;
	bool renew_;
};

class RedisClient : public Client
{
  public:
	RedisClient(const std::string &address, const std::string &resource, bool renew)
	    : redis_(host_of(address), port_of(address)), resource_(resource), renew_(renew)
	{
		if (renew_)
			acquire();
	}
	void operation() override
	{
		if (renew_) {
			redis_.renew(resource_, "bench", 10000);
			return;
		}
		acquire();
		redis_.release(resource_, "bench");
	}

  private:
	static std::string host_of(const std::string &address)
	{
		auto colon = address.rfind(':');
		if (colon == std::string::npos)
			fail("--redis takes HOST:PORT");
		return address.substr(0, colon);
	}
	static int port_of(const std::string &address)
	{
		return std::atoi(address.c_str() + address.rfind(':') + 1);
	}
	void acquire()
	{
		if (redis_.acquire(resource_, "bench", 10000) == 0)
			fail("Redis: acquire refused a free resource");
	}
	redis_locks::Connection redis_;
	std::string resource_;
	bool renew_;
};

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
		else
			fail("unknown option " + a);
	}
	if (o.pg.empty() == o.redis.empty())
		fail("give exactly one of --pg CONNINFO and --redis HOST:PORT");
	if (o.op != "acquire-release" && o.op != "renew")
		fail("--op is acquire-release or renew");
	if (o.clients < 1 || o.seconds <= 0)
		fail("--clients and --seconds must be positive");
	return o;
}

} // namespace

int run(int argc, char **argv)
{
	Options o = parse(argc, argv);
	bool renew = o.op == "renew";
	std::vector<std::unique_ptr<Client>> clients;
	for (int c = 0; c < o.clients; c++) {
		// Each run its own resources, so that no lease of an earlier run is still live.
		std::string resource =
		    "bench:" + o.op + ":" + std::to_string(getpid()) + ":" + std::to_string(c);
		if (!o.pg.empty())
			clients.push_back(std::make_unique<PgClient>(o.pg, resource, renew));
		else
			clients.push_back(std::make_unique<RedisClient>(o.redis, resource, renew));
	}
	std::atomic<bool> stop{false};
	std::vector<long> counts(o.clients, 0);
	std::vector<std::thread> threads;
	auto start = std::chrono::steady_clock::now();
	for (int c = 0; c < o.clients; c++)
		threads.emplace_back([&, c] {
			while (!stop.load(std::memory_order_relaxed)) {
				clients[c]->operation();
				counts[c]++;
			}
		});
	std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
	stop = true;
	for (auto &t : threads)
		t.join();
	double elapsed =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	long total = 0;
	for (long n : counts)
		total += n;
	std::printf("%.1f %ld\n", total / elapsed, total);
	return 0;
}

int main(int argc, char **argv)
{
	try {
		return run(argc, argv);
	} catch (const std::exception &e) {
		fail(e.what());
	}
}
