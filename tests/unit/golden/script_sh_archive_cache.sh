trap 'exit 1' TERM

case "$(set -o)" in *pipefail*) set -o pipefail;; esac
set -o errexit
set +o noclobber
( trap 'exit 1' TERM; eval 'export CI_JOB_ID='\''42'\''
export CI_PROJECT_DIR='\''/builds/t3_abc/0/acme/widget'\''
export NASTY='\''a'\''\'\'''\''b"c $(x) `y` \n
%s'\''
# variable 3 skipped: its name is not a valid shell variable name
mkdir -p '\''/builds/t3_abc/0/acme/widget.tmp'\''
(umask 077 && rm -f '\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\'' && printf '\''%s'\'' '\''-----BEGIN-----
x
'\'' > '\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\'')
export CA_FILE='\''/builds/t3_abc/0/acme/widget.tmp/CA_FILE'\''
export EMPTY='\'''\''
export GITLAB_ENV='\''/builds/t3_abc/0/acme/widget.tmp/gitlab_runner_env'\''
mkdir -p '\''/builds/t3_abc/0/acme/widget.tmp'\''
touch "$GITLAB_ENV"
while IFS= read -r _runner_env_line || [ -n "$_runner_env_line" ]; do
  case "$_runner_env_line" in *=*) export "$_runner_env_line";; esac
done < "$GITLAB_ENV"
unset _runner_env_line
cd '\''/builds/t3_abc/0/acme/widget'\''
printf '\''\033[0;33mWARNING: %s\033[0;m\n'\'' '\''cache key "a/../b" sanitized to "b"'\''
if '\''/usr/local/bin/run ner'\'' --version >/dev/null 2>&1; then
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Creating cache b...'\''
if '\''/usr/local/bin/run ner'\'' cache-archiver --file '\''/cache/acme/widget/b/cache.zip'\'' --timeout 10 --path '\''vendor/'\'' --path '\''node_modules/**/*.js'\''; then
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Created cache'\''
else
printf '\''\033[0;33mWARNING: %s\033[0;m\n'\'' '\''Failed to create cache'\''
fi
else
printf '\''\033[0;33mWARNING: %s\033[0;m\n'\'' '\''Missing /usr/local/bin/run ner. Creating cache is disabled.'\''
fi
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Not uploading cache it'\''\'\'''\''s due to policy'\''
printf '\''\033[32;1m%s\033[0;m\n'\'' '\''Skipping cache archiving due to empty cache key'\''
' ) < /dev/null
exit 0
