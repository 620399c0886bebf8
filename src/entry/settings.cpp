/*
 * Every setting of the extension: its name, description, default, range,
 * context and hooks are written here; the variables live with the code that
 * reads them.  The superuser settings go through define_superuser_setting()
 * (base/late_load.hpp): a module loaded after the session started may have
 * lost their configured values.
 */
#include "entry/settings.hpp"
#include "base/late_load.hpp"
#include "reporting/rollout.hpp"
#include "state/maintenance_setting.hpp"
#include "reporting/stats.hpp"
#include "state/lease_grace.hpp"
#include "state/lease_memory.hpp"
#include "state/token_issue.hpp"
#include "state/token_setting.hpp"

extern "C" {
#include "miscadmin.h"
#include "utils/guc.h"
}

namespace fencing
{

namespace
{

/* fencing.token: see state/token_setting.cpp. */
void define_token_setting()
{
	DefineCustomStringVariable(
	    "fencing.token", "Fencing token presented by this transaction's writes.",
	    "Applies only to the transaction in which it is set: SET LOCAL fencing.token = "
	    "<token>, or set_config('fencing.token', <token>, true).",
	    &token_setting_text, "", PGC_USERSET, 0, check_token, assign_token, nullptr);
	token_setting_defined();
}

/* fencing.maintenance: see state/maintenance_setting.cpp. */
void define_maintenance_setting()
{
	DefineCustomBoolVariable(
	    "fencing.maintenance",
	    "Asks for maintenance writes: the owner or maintainer of a protected table writes "
	    "without a token.",
	    "Applies only to the transaction in which it is set: SET LOCAL fencing.maintenance = on.",
	    &maintenance_setting_value, false, PGC_USERSET, 0, check_maintenance, assign_maintenance,
	    nullptr);
	maintenance_setting_defined();
}

/* The lease manager's: see state/token_issue.cpp. */
void define_token_issue_settings()
{
	define_superuser_setting("fencing.failover_margin", [] {
		DefineCustomIntVariable(
		    "fencing.failover_margin",
		    "How far the first token on a new timeline or system is set ahead of the server "
		    "clock.",
		    "Covers a clock that is behind the old server's after a restore that keeps the "
		    "timeline; a promotion orders tokens by its new timeline anyway.",
		    &failover_margin, 10000, 0, 3600000, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
	});
	define_superuser_setting("fencing.grant_confirmation", [] {
		DefineCustomEnumVariable(
		    "fencing.grant_confirmation",
		    "Refuses lease grants and renewals that no standby can confirm.",
		    "off: no check; standby: a standby replied within fencing.standby_reply_timeout; "
		    "synchronous: as many synchronous standbys as synchronous_standby_names needs did.",
		    &grant_confirmation, confirm_off, confirmation_options, PGC_SUSET, 0, nullptr, nullptr,
		    nullptr);
	});
	define_superuser_setting("fencing.standby_reply_timeout", [] {
		DefineCustomIntVariable("fencing.standby_reply_timeout",
		                        "How recent a standby's last reply must be for "
		                        "fencing.grant_confirmation.",
		                        nullptr, &standby_reply_timeout, 5000, 1, 3600000, PGC_SUSET,
		                        GUC_UNIT_MS, nullptr, nullptr, nullptr);
	});
}

/* The durable horizon of leases: see state/lease_grace.cpp. */
void define_lease_grace_settings()
{
	define_superuser_setting("fencing.lease_grace", [] {
		DefineCustomIntVariable(
		    "fencing.lease_grace",
		    "How far beyond a lease's expiry its durable horizon (grace_until) is set.",
		    "A renewal whose new expiry stays within the horizon commits without a flush; after "
		    "a restart or promotion a lease not released is held until its horizon.",
		    &lease_grace, 10000, 0, 3600000, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
	});
	define_superuser_setting("fencing.lease_durability", [] {
		DefineCustomEnumVariable(
		    "fencing.lease_durability", "Which lease changes wait for a WAL flush.",
		    "grace: grants and renewals that move the durable horizon (needs "
		    "shared_preload_libraries); always: every acquire, renew and release.",
		    &lease_durability, durability_grace, lease_durability_options, PGC_SUSET, 0, nullptr,
		    nullptr, nullptr);
	});
}

/* Statistics: see reporting/stats.cpp. */
void define_stats_settings()
{
	DefineCustomBoolVariable("fencing.stats",
	                         "Counts accepted and rejected writes in fencing.stats.",
	                         "Takes effect with shared_preload_libraries = 'fencing'.", &stats_on,
	                         true, PGC_SUSET, 0, nullptr, nullptr, nullptr);
	define_superuser_setting("fencing.log_rejections", [] {
		DefineCustomEnumVariable("fencing.log_rejections",
		                         "Logs every rejected write (stale: stale tokens only).", nullptr,
		                         &log_rejections, 0, log_rejection_options, PGC_SUSET, 0, nullptr,
		                         nullptr, nullptr);
	});
	/* A server setting can only be defined while the server starts, and only then is it needed. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable(
	    "fencing.stats_max", "Relations and resources fencing.stats keeps counters for.", nullptr,
	    &stats_max, 1000, 100, 1000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable(
	    "fencing.rollout_report_max", "Groups of would-be refusals fencing.rollout_report keeps.",
	    "A group is a protected table, role, application_name and reason; "
	    "when all are taken, new groups count in an overflow row.",
	    &rollout_report_max, 1000, 100, 1000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable(
	    "fencing.lease_memory",
	    "Leases whose renewals the lease memory can keep without a row write.",
	    "A renewal within the durable horizon sets the expiry in shared memory only; 0 turns it "
	    "off (every renewal writes its row).",
	    &lease_memory_size, 8192, 0, 1048576, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
}

} // namespace

void define_settings()
{
	define_token_setting();
	define_maintenance_setting();
	define_token_issue_settings();
	define_lease_grace_settings();
	define_stats_settings();
}

} // namespace fencing
