/*
 * The installed release: see installed_release.hpp.  Told by the release
 * pg_extension records (catalog/extension.hpp), the one answer the module
 * has to "which release is installed here"; a release this library does not
 * know by name is a later one, with the current objects.
 */
#include "legacy/installed_release.hpp"
#include "catalog/extension.hpp"

namespace fencing
{

Release installed_release()
{
	const char *version = installed_version();
	if (version == nullptr)
		return Release::none;
	if (strcmp(version, "0.1.0") == 0)
		return Release::v0_1_0;
	if (strcmp(version, "0.2.0") == 0)
		return Release::v0_2_0;
	if (strcmp(version, "0.3.0") == 0)
		return Release::v0_3_0;
	return Release::current;
}

bool objects_before_0_4_0()
{
	Release release = installed_release();
	return release != Release::none && release != Release::current;
}

Layout installed_layout()
{
	switch (installed_release()) {
	case Release::v0_1_0:
		return Layout::v0_1_0;
	case Release::v0_2_0:
		return Layout::v0_2_0;
	default:
		return Layout::current; /* 0.3.0 on, or not installed: nothing to read */
	}
}

const char *layout_release(Layout layout)
{
	switch (layout) {
	case Layout::v0_1_0:
		return "0.1.0";
	case Layout::v0_2_0:
		return "0.2.0";
	default:
		return "0.3.0";
	}
}

} // namespace fencing
