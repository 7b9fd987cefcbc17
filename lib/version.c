/*
 * Build identity.  The Makefile passes the version and the git revision to
 * this file only, so a new commit recompiles one object.  Architectures are
 * named as Go names them, because GitLab shows and filters on gitlab-runner's
 * names (amd64, not x86_64).
 */
#include "lib/version.h"

#ifndef RUNNER_VERSION
#define RUNNER_VERSION "0.0.0"
#endif
#ifndef RUNNER_REVISION
#define RUNNER_REVISION "unknown"
#endif

const char *
version_number(void)
{
	return RUNNER_VERSION;
}

const char *
version_revision(void)
{
	return RUNNER_REVISION;
}

const char *
version_os(void)
{
#if defined(__linux__)
	return "linux";
#elif defined(__FreeBSD__)
	return "freebsd";
#elif defined(__APPLE__)
	return "darwin";
#else
	return "unknown";
#endif
}

const char *
version_arch(void)
{
#if defined(__x86_64__)
	return "amd64";
#elif defined(__i386__)
	return "386";
#elif defined(__aarch64__)
	return "arm64";
#elif defined(__arm__)
	return "arm";
#elif defined(__s390x__)
	return "s390x";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
	return "ppc64le";
#elif defined(__riscv) && __riscv_xlen == 64
	return "riscv64";
#else
	return "unknown";
#endif
}
