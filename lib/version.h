/* What this build is: for --version, the User-Agent and the job log header. */
#ifndef LIB_VERSION_H
#define LIB_VERSION_H

const char	*version_number(void);	/* "0.1.0" */
const char	*version_revision(void);	/* short git commit, or "unknown" */
const char	*version_os(void);		/* "linux" */
const char	*version_arch(void);		/* "amd64", "arm64", ... as Go names them */

#endif
