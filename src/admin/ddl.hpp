/*
 * protect(), unprotect() and the DDL the extension follows (ddl.cpp): the
 * parts entry/module.cpp calls.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/objectaccess.h"
}

namespace fencing
{

/* From _PG_init: a module loaded during a statement may have missed its drops. */
void ddl_module_loaded();

/* The object access hook: records the partitions a command drops. */
void ddl_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id);

/* At the end of a transaction: forgets the partitions it dropped. */
void ddl_end_of_transaction(XactEvent event);

} // namespace fencing
