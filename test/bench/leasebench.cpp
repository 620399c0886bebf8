// leasebench: lease operations per second, PostgreSQL (fencing.acquire/renew/
// release) against Redis running the seed design's Lua scripts, with the same
// client code shape: one connection per client thread, one round trip per call.
//
//   leasebench --pg CONNINFO | --redis HOST:PORT  --op acquire-release|renew
//              [--clients N] [--seconds S]
//
// Prints one line: "<ops per second> <operations>".

#include <hiredis/hiredis.h>
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

namespace {

// The seed design: SET NX PX then INCR, {1, token} or {0, 0}.
const char *const acquire_lua = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
                                "return {1, redis.call('INCR', KEYS[2])} else return {0, 0} end";
const char *const renew_lua = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                              "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
const char *const release_lua = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                "return redis.call('DEL', KEYS[1]) else return 0 end";

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
class Client {
  public:
	virtual ~Client() = default;
	virtual void operation() = 0; // one acquire+release pair, or one renew
};

class PgClient : public Client {
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

class RedisClient : public Client {
  public:
	RedisClient(const std::string &address, const std::string &resource, bool renew)
	    : lock_("lock:" + resource), counter_("counter:" + resource), renew_(renew)
	{
		auto colon = address.rfind(':');
		if (colon == std::string::npos)
			fail("--redis takes HOST:PORT");
		conn_.reset(redisConnect(address.substr(0, colon).c_str(),
		                         std::atoi(address.c_str() + colon + 1)));
		if (!conn_ || conn_->err)
			fail(std::string("Redis: ") + (conn_ ? conn_->errstr : "cannot connect"));
		acquire_sha_ = load(acquire_lua);
		renew_sha_ = load(renew_lua);
		release_sha_ = load(release_lua);
		if (renew_)
			acquire();
	}
	void operation() override
	{
		if (renew_) {
			eval(renew_sha_, 1);
			return;
		}
		acquire();
		eval(release_sha_, 0);
	}

  private:
	using Reply = std::unique_ptr<redisReply, void (*)(void *)>;
	Reply command(const std::vector<std::string> &args)
	{
		std::vector<const char *> argv;
		std::vector<size_t> lens;
		for (auto &a : args) {
			argv.push_back(a.data());
			lens.push_back(a.size());
		}
		Reply r(static_cast<redisReply *>(redisCommandArgv(conn_.get(), static_cast<int>(argv.size()),
		                                                   argv.data(), lens.data())),
		        freeReplyObject);
		if (!r || r->type == REDIS_REPLY_ERROR)
			fail(std::string("Redis: ") + (r ? r->str : conn_->errstr));
		return r;
	}
	std::string load(const char *script) { return command({"SCRIPT", "LOAD", script})->str; }
	Reply eval(const std::string &sha, int with_ttl)
	{
		std::vector<std::string> args{"EVALSHA", sha, "1", lock_, "bench"};
		if (with_ttl)
			args.push_back("10000");
		return command(args);
	}
	void acquire()
	{
		Reply r = command({"EVALSHA", acquire_sha_, "2", lock_, counter_, "bench", "10000"});
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->integer != 1)
			fail("Redis: acquire refused a free resource");
	}
	std::unique_ptr<redisContext, void (*)(redisContext *)> conn_{nullptr, redisFree};
	std::string lock_, counter_, acquire_sha_, renew_sha_, release_sha_;
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

int main(int argc, char **argv)
{
	Options o = parse(argc, argv);
	bool renew = o.op == "renew";
	std::vector<std::unique_ptr<Client>> clients;
	for (int c = 0; c < o.clients; c++) {
		// Each run its own resources, so that no lease of an earlier run is still live.
		std::string resource = "bench:" + o.op + ":" + std::to_string(getpid()) + ":" +
		                       std::to_string(c);
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
	double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	long total = 0;
	for (long n : counts)
		total += n;
	std::printf("%.1f %ld\n", total / elapsed, total);
	return 0;
}
