#include <stdio.h>

#include "lib/size.h"

void
size_format(unsigned long long bytes, char *out, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, size, "%llu B", bytes);
	else
		snprintf(out, size, "%.1f %s", v, units[u]);
}
