/*
 * PostgreSQL version differences, in one place (PostgreSQL 15 to 18).
 */
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/acl.h"
}

namespace fencing
{

/* Does `role` own relation `relid` (or is it a member of the owner, or superuser)? */
inline bool owns_relation(Oid relid, Oid role)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(RelationRelationId, relid, role);
#else
	return pg_class_ownercheck(relid, role);
#endif
}

} // namespace fencing
