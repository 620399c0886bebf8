// The seed design's Redis lock manager, shared by the harness and the lease
// benchmark: the three Lua scripts and a small hiredis wrapper.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace redis_locks
{

// SET lock NX PX ttl, then INCR counter: {1, token}, or {0, 0} if the lock is held.
inline const char *const acquire_lua =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "return {1, redis.call('INCR', KEYS[2])} else return {0, 0} end";
// Renew and release only for the holder that has the lock.
inline const char *const renew_lua =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
inline const char *const release_lua = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                       "return redis.call('DEL', KEYS[1]) else return 0 end";

using Reply = std::unique_ptr<redisReply, void (*)(void *)>;

// One connection; every failure is a std::runtime_error.
class Connection
{
  public:
	Connection(const std::string &host, int port)
	{
		ctx_.reset(redisConnect(host.c_str(), port));
		if (!ctx_ || ctx_->err)
			throw std::runtime_error(std::string("Redis: ") +
			                         (ctx_ ? ctx_->errstr : "cannot connect"));
	}
	Reply command(const std::vector<std::string> &args)
	{
		std::vector<const char *> argv;
		std::vector<size_t> lens;
		for (auto &a : args) {
			argv.push_back(a.data());
			lens.push_back(a.size());
		}
		Reply r(static_cast<redisReply *>(redisCommandArgv(
		            ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data())),
		        freeReplyObject);
		if (!r || r->type == REDIS_REPLY_ERROR)
			throw std::runtime_error(std::string("Redis: ") + (r ? r->str : ctx_->errstr));
		return r;
	}
	// EVALSHA of a script loaded once per connection.
	Reply eval(const char *script, const std::vector<std::string> &keys,
	           const std::vector<std::string> &args)
	{
		std::string &sha = script == acquire_lua ? acquire_sha_
		                   : script == renew_lua ? renew_sha_
		                                         : release_sha_;
		if (sha.empty())
			sha = command({"SCRIPT", "LOAD", script})->str;
		std::vector<std::string> argv{"EVALSHA", sha, std::to_string(keys.size())};
		argv.insert(argv.end(), keys.begin(), keys.end());
		argv.insert(argv.end(), args.begin(), args.end());
		return command(argv);
	}
	// The token of a grant, or 0 if the lock is held.
	long long acquire(const std::string &resource, const std::string &holder, int ttl_ms)
	{
		Reply r = eval(acquire_lua, {"lock:" + resource, "counter:" + resource},
		               {holder, std::to_string(ttl_ms)});
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->integer != 1)
			return 0;
		return r->element[1]->integer;
	}
	bool renew(const std::string &resource, const std::string &holder, int ttl_ms)
	{
		return eval(renew_lua, {"lock:" + resource}, {holder, std::to_string(ttl_ms)})->integer ==
		       1;
	}
	bool release(const std::string &resource, const std::string &holder)
	{
		return eval(release_lua, {"lock:" + resource}, {holder})->integer == 1;
	}

  private:
	std::unique_ptr<redisContext, void (*)(redisContext *)> ctx_{nullptr, redisFree};
	std::string acquire_sha_, renew_sha_, release_sha_;
};

} // namespace redis_locks
