/*
 * .runner_system_id: read it, or derive one and write it (temp file and
 * rename, so two commands started together cannot leave half an id).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/rand.h"
#include "lib/xmalloc.h"
#include "runner/system_id.h"

/* Does s have the form ^[sr]_[0-9a-zA-Z]{12}$? */
static bool
system_id_valid(const char *s)
{
	size_t i;

	if (s == NULL || (s[0] != 's' && s[0] != 'r') || s[1] != '_')
		return false;
	for (i = 2; i < 14; i++)
		if (!isalnum((unsigned char)s[i]))
			return false;
	return s[14] == '\0';
}

static char *
read_line(const char *path)
{
	char line[256];
	FILE *fp = fopen(path, "r");
	size_t n;

	if (fp == NULL)
		return NULL;
	if (fgets(line, sizeof(line), fp) == NULL) {
		fclose(fp);
		return NULL;
	}
	fclose(fp);
	n = strlen(line);
	while (n > 0 && isspace((unsigned char)line[n - 1]))
		line[--n] = '\0';
	return xstrdup(line);
}

/* gitlab-runner's machineid.ProtectedID("gitlab-runner"), first 12 digits. */
static char *
derive_from_machine_id(void)
{
	static const char *const paths[] = { "/etc/machine-id",
	    "/var/lib/dbus/machine-id" };
	unsigned char mac[EVP_MAX_MD_SIZE];
	size_t i, maclen = 0;
	char *id = NULL, out[15];

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]) && id == NULL; i++)
		id = read_line(paths[i]);
	if (id == NULL || *id == '\0') {
		free(id);
		return NULL;
	}
	if (EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, id, strlen(id),
	    (const unsigned char *)"gitlab-runner", 13, mac, sizeof(mac), &maclen) == NULL ||
	    maclen < 6) {
		free(id);
		return NULL;
	}
	free(id);
	memcpy(out, "s_", 2);
	for (i = 0; i < 6; i++)
		snprintf(out + 2 + i * 2, 3, "%02x", mac[i]);
	return xstrdup(out);
}

static char *
random_id(void)
{
	static const char alnum[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char out[15];
	size_t i;

	memcpy(out, "r_", 2);
	for (i = 2; i < 14; i++)
		out[i] = alnum[rand_u32() % (sizeof(alnum) - 1)];
	out[14] = '\0';
	return xstrdup(out);
}

static int
write_id(const char *path, const char *id)
{
	char *line = xasprintf("%s\n", id);
	int rc = fd_replace_file(path, line, strlen(line), 0644);

	free(line);
	return rc;
}

char *
system_id_load(const char *config_dir)
{
	char *path = xasprintf("%s/.runner_system_id", config_dir);
	char *id = read_line(path);

	if (id != NULL && system_id_valid(id)) {
		free(path);
		return id;
	}
	if (id != NULL)
		log_warnx("%s: \"%s\" is not a system ID; making a new one", path, id);
	free(id);
	if ((id = derive_from_machine_id()) == NULL)
		id = random_id();
	if (write_id(path, id) != 0)
		log_warnx("cannot write %s (%s): create it with the line %s so that "
		    "this machine keeps its system ID", path, strerror(errno), id);
	free(path);
	return id;
}
