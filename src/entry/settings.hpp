/*
 * Every setting of the extension, defined in one place (settings.cpp).
 */
#pragma once

namespace fencing
{

/*
 * Defines the settings, in this order: fencing.token; fencing.failover_margin,
 * fencing.grant_confirmation, fencing.standby_reply_timeout (issuing tokens);
 * fencing.stats, fencing.log_rejections and, only while the server starts
 * with the module preloaded, fencing.stats_max (statistics).  From _PG_init,
 * before any hook is installed.
 */
void define_settings();

} // namespace fencing
