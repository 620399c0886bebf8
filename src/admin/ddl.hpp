/*
 * protect(), unprotect() and the DDL the extension follows (src/ddl.cpp).
 */
#pragma once

namespace fencing
{

/* Installs the object access hook that records dropped partitions (from _PG_init). */
void install_drop_check();

} // namespace fencing
