/*
 * The system ID: which machine a runner token is being used from.  GitLab
 * keys its "runner manager" records on it, so it must stay the same across
 * restarts: it lives in .runner_system_id next to config.toml, where
 * gitlab-runner keeps it, and a host that switches programs keeps its id.
 */
#ifndef RUNNER_SYSTEM_ID_H
#define RUNNER_SYSTEM_ID_H

/*
 * The id stored in <config_dir>/.runner_system_id, created if missing:
 * "s_" + 12 hex digits of HMAC-SHA256(machine id, "gitlab-runner") when
 * /etc/machine-id is readable (gitlab-runner's derivation), else "r_" + 12
 * random letters and digits.  If the file cannot be written the id is still
 * returned and a warning says how to create the file.  The caller frees it.
 */
char	*system_id_load(const char *config_dir);

#endif
