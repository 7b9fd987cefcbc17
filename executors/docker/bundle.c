/*
 * The helper bundle (bundle.h).  The shared objects are the ones the
 * loader opened for this process, by the names it opened them under
 * (dl_iterate_phdr), so that the names the binary needs (its DT_NEEDED
 * sonames) are the names in lib/.  The tar is plain ustar written here:
 * fixed owners and times, so the same binary always makes the same bytes
 * and so the same volume name.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "executors/docker/bundle.h"
#include "lib/fdio.h"
#include "lib/mkdirs.h"
#include "lib/strv.h"
#include "lib/version.h"
#include "lib/xmalloc.h"

struct tar_out {
	int		 fd;
	EVP_MD_CTX	*sha;
	off_t		 size;
	int		 error;		/* the first errno */
};

static void
out_write(struct tar_out *t, const void *p, size_t n)
{
	if (t->error != 0)
		return;
	if (fd_write_all(t->fd, p, n) != 0) {
		t->error = errno;
		return;
	}
	EVP_DigestUpdate(t->sha, p, n);
	t->size += (off_t)n;
}

static void
octal(char *field, size_t len, unsigned long long v)
{
	snprintf(field, len, "%0*llo", (int)len - 1, v);
}

static void
tar_header(struct tar_out *t, const char *name, unsigned mode, unsigned long long size,
    char type)
{
	unsigned char h[512];
	unsigned sum = 0;
	size_t i;

	memset(h, 0, sizeof(h));
	snprintf((char *)h, 100, "%s", name);
	octal((char *)h + 100, 8, mode);
	octal((char *)h + 108, 8, 0);
	octal((char *)h + 116, 8, 0);
	octal((char *)h + 124, 12, size);
	octal((char *)h + 136, 12, 0);
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	for (i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	out_write(t, h, sizeof(h));
}

static void
tar_pad(struct tar_out *t, unsigned long long size)
{
	static const char zero[512];

	if (size % 512)
		out_write(t, zero, 512 - size % 512);
}

static void
tar_text(struct tar_out *t, const char *name, unsigned mode, const char *text)
{
	size_t n = strlen(text);

	tar_header(t, name, mode, n, '0');
	out_write(t, text, n);
	tar_pad(t, n);
}

/* A file of this machine into the tar as name; -1 with errno if it cannot be read. */
static int
tar_file(struct tar_out *t, const char *name, const char *path)
{
	char chunk[65536];
	struct stat st;
	ssize_t r;
	off_t left;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	tar_header(t, name, 0755, (unsigned long long)st.st_size, '0');
	for (left = st.st_size; left > 0; left -= r) {
		r = read(fd, chunk, (size_t)(left < (off_t)sizeof(chunk) ? left : (off_t)sizeof(chunk)));
		if (r <= 0) {
			if (t->error == 0)
				t->error = r < 0 ? errno : EIO;	/* shrank while read */
			break;
		}
		out_write(t, chunk, (size_t)r);
	}
	close(fd);
	tar_pad(t, (unsigned long long)st.st_size);
	return 0;
}

struct loaded {
	struct strv	 paths;
	char		*loader;
};

static int
on_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct loaded *l = arg;

	(void)size;
	/* The program itself has no name; the vDSO has no path. */
	if (info->dlpi_name == NULL || strchr(info->dlpi_name, '/') == NULL)
		return 0;
	if (info->dlpi_addr == getauxval(AT_BASE)) {
		free(l->loader);
		l->loader = xstrdup(info->dlpi_name);
	}
	strv_push(&l->paths, info->dlpi_name);
	return 0;
}

static const char *
base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s != NULL ? s + 1 : path;
}

/* Made once per process: the binary does not change under a running daemon. */
static struct bundle	made;

static void
bundle_copy(struct bundle *to, const struct bundle *from)
{
	to->path = xstrdup(from->path);
	to->size = from->size;
	to->id = xstrdup(from->id);
}

int
bundle_make(const char *dir, struct bundle *b, char **cause)
{
	struct loaded l = { 0 };
	struct tar_out t = { .fd = -1 };
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *tmp = NULL, *final = NULL, *wrapper, exe[4096], id[17];
	struct stat st;
	ssize_t n;
	size_t i;
	int rc = -1;

	memset(b, 0, sizeof(*b));
	if (made.path != NULL && stat(made.path, &st) == 0 && st.st_size == made.size &&
	    strncmp(made.path, dir, strlen(dir)) == 0) {
		bundle_copy(b, &made);
		return 0;
	}
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0) {
		*cause = xasprintf("cannot find this program (/proc/self/exe): %s",
		    strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	dl_iterate_phdr(on_object, &l);
	if (l.loader == NULL) {
		*cause = xstrdup("cannot find this program's dynamic loader: a static build "
		    "needs no bundle, and this one is not static");
		goto out;
	}
	if (mkdirs(dir, 0700, NULL) != 0) {
		*cause = xasprintf("cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	tmp = xasprintf("%s/.runner-bundle-XXXXXX", dir);
	if ((t.fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		*cause = xasprintf("cannot create a file in %s: %s", dir, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	t.sha = EVP_MD_CTX_new();
	EVP_DigestInit_ex(t.sha, EVP_sha256(), NULL);

	tar_header(&t, "bin/", 0755, 0, '5');
	tar_header(&t, "lib/", 0755, 0, '5');
	wrapper = xasprintf("#!/bin/sh\nexec " BUNDLE_MOUNT "/lib/%s --library-path "
	    BUNDLE_MOUNT "/lib " BUNDLE_MOUNT "/runner \"$@\"\n", base(l.loader));
	tar_text(&t, "bin/runner", 0755, wrapper);
	free(wrapper);
	if (tar_file(&t, "runner", exe) != 0) {
		*cause = xasprintf("cannot read %s: %s", exe, strerror(errno));
		goto out;
	}
	for (i = 0; i < l.paths.n; i++) {
		char *name = xasprintf("lib/%s", base(l.paths.v[i]));
		size_t k;
		bool dup = false;

		for (k = 0; k < i; k++)
			dup |= strcmp(base(l.paths.v[k]), base(l.paths.v[i])) == 0;
		if (!dup && tar_file(&t, name, l.paths.v[i]) != 0) {
			*cause = xasprintf("cannot read %s: %s", l.paths.v[i], strerror(errno));
			free(name);
			goto out;
		}
		free(name);
	}
	{
		static const char end[1024];

		out_write(&t, end, sizeof(end));
	}
	if (t.error == 0 && fsync(t.fd) != 0)
		t.error = errno;
	if (t.error != 0) {
		*cause = xasprintf("cannot write the helper bundle %s: %s", tmp,
		    strerror(t.error));
		goto out;
	}
	EVP_DigestFinal_ex(t.sha, md, &mdlen);
	for (i = 0; i < 8; i++)
		snprintf(id + 2 * i, 3, "%02x", md[i]);
	final = xasprintf("%s/runner-bundle-%s.tar", dir, id);
	if (stat(final, &st) == 0 && st.st_size == t.size)
		unlink(tmp);
	else if (rename(tmp, final) != 0 || fd_sync_parent(final) != 0) {
		*cause = xasprintf("cannot write the helper bundle %s: %s", final,
		    strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	b->path = final;
	final = NULL;
	b->size = t.size;
	b->id = xstrdup(id);
	bundle_release(&made);
	bundle_copy(&made, b);
	rc = 0;
out:
	if (t.fd >= 0)
		close(t.fd);
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	free(final);
	if (t.sha != NULL)
		EVP_MD_CTX_free(t.sha);
	strv_release(&l.paths);
	free(l.loader);
	return rc;
}

char *
bundle_volume_name(const struct bundle *b)
{
	char *v = xstrdup(version_number()), *p, *name;

	/* A volume name is [a-zA-Z0-9][a-zA-Z0-9_.-]*. */
	for (p = v; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			*p = '-';
	name = xasprintf("runner-helper-%s-%s", v, b->id);
	free(v);
	return name;
}

void
bundle_release(struct bundle *b)
{
	free(b->path);
	free(b->id);
	memset(b, 0, sizeof(*b));
}
