/*
 * What script.c shares with the other files that write stage text
 * (script_transfer.c): the message formats and the words every stage uses.
 * Not for anyone else: the stage text's public face is script.h.
 */
#ifndef RUNNER_SCRIPT_INT_H
#define RUNNER_SCRIPT_INT_H

#include "lib/buf.h"
#include "runner/script.h"

/* Fixed printf formats for the runner's own lines (protocol.md 6.5). */
#define FMT_NOTICE	"printf '\\033[32;1m%s\\033[0;m\\n' "
#define FMT_WARNING	"printf '\\033[0;33mWARNING: %s\\033[0;m\\n' "
#define FMT_ERROR	"printf '\\033[31;1mERROR: %s\\033[0;m\\n' "

/* One runner message line: printf with fmt and text as its argument. */
void	script_say(struct buf *b, const char *fmt, const char *text);
/* The variable exports, then cd into the project directory. */
void	script_prologue(struct buf *b, const struct script_job *j);

/* The cache and artifact stages' bodies; 0 when there is nothing to do. */
int	script_restore_cache(struct buf *b, const struct script_job *j);
int	script_download_artifacts(struct buf *b, const struct script_job *j);
int	script_archive_cache(struct buf *b, const struct script_job *j);
int	script_upload_artifacts(struct buf *b, const struct script_job *j);

#endif
